/// Names at the destination: Windows-safe mapping, Finder-style numbering, temporary names.
enum NameRules {
  private static let reserved: Set<String> = {
    var names: Set<String> = ["CON", "PRN", "AUX", "NUL"]
    for digit in 1...9 {
      names.insert("COM\(digit)")
      names.insert("LPT\(digit)")
    }
    return names
  }()

  /// `name` changed only as far as a Windows share needs: `: * ? " < > | \` and control
  /// characters become `_`, trailing dots and spaces become `_`, and a reserved device name
  /// (`CON`, `con.txt`, `LPT1`…) gets a leading `_`.
  static func windowsSafe(_ name: String) -> String {
    var scalars = String.UnicodeScalarView()
    for scalar in name.unicodeScalars {
      if scalar.value < 0x20 || ":*?\"<>|\\".unicodeScalars.contains(scalar) {
        scalars.append("_")
      } else {
        scalars.append(scalar)
      }
    }
    var trailing = 0
    while let last = scalars.last, last == "." || last == " " {
      scalars.removeLast()
      trailing += 1
    }
    var result = String(scalars) + String(repeating: "_", count: trailing)
    let stem = result.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)[0]
    if reserved.contains(stem.trimmingTrailingSpaces().uppercased()) { result = "_" + result }
    return result
  }

  /// The `number`th candidate for a name: `report.pdf`, `report 2.pdf`, `report 3.pdf`…
  /// Folders and names without an extension are numbered at the end: `photos 2`.
  static func numbered(_ name: String, _ number: Int, isDirectory: Bool) -> String {
    guard number > 1 else { return name }
    if !isDirectory, let dot = name.lastIndex(of: "."), dot != name.startIndex,
      name.index(after: dot) != name.endIndex
    {
      return "\(name[..<dot]) \(number)\(name[dot...])"
    }
    return "\(name) \(number)"
  }

  /// A random id for one attempt at delivering a file: 16 hex digits (64 bits from the
  /// system's generator), so no two attempts, of this process or another, share one.
  static func attemptID() -> String {
    var generator = SystemRandomNumberGenerator()
    let hex = String(generator.next(), radix: 16)
    return String(repeating: "0", count: 16 - hex.count) + hex
  }

  /// The hidden, Windows-safe temporary name of an attempt: `.browserdrop-<id>.part`. Unique
  /// per attempt, so two writers never write into the same temporary file, and a resume knows
  /// that whatever has its recorded name is its own.
  static func temporaryName(attempt: String) -> String {
    ".browserdrop-" + attempt + ".part"
  }

  /// Where a resume moves an attempt's temporary file to fence off a rename of it still on its
  /// way (``DestinationFileSystem/fence(_:aside:)``): `.browserdrop-<id>.aside`, beside it.
  static func aside(of temporary: RelativePath) -> RelativePath {
    guard let name = temporary.last, name.hasSuffix(".part") else { return temporary }
    return temporary.dropLast() + [String(name.dropLast(".part".count)) + ".aside"]
  }

  /// What an attempt writes into each claim it makes (SMB), so a resume can tell its own
  /// claim from any other file at the name, even one that got the claim's inode number after
  /// libsmbclient deleted it: `browserdrop claim <attempt id>` and a newline, a fixed
  /// ``claimTokenLength`` bytes.
  static func claimToken(attempt: String) -> [UInt8] {
    Array("browserdrop claim \(attempt)\n".utf8)
  }

  /// The size of every ``claimToken(attempt:)``.
  static let claimTokenLength = claimToken(attempt: attemptID()).count

  /// Whether a file of `size` bytes may be a claim: an empty one (just created, or made by a
  /// version before claim tokens) or one holding a token.
  static func isClaimSized(_ size: Int64) -> Bool {
    size == 0 || size == Int64(claimTokenLength)
  }

  /// The hidden name of a run's marker (``DestinationFileSystem/holdMarker(_:)``), in the
  /// destination's root folder: `.browserdrop-<random id>.live`.
  static func markerName() -> String {
    ".browserdrop-" + attemptID() + ".live"
  }

  /// Whether `name` has the form of a run's marker (``markerName()``): the prefix, 16 ASCII
  /// digits or lowercase letters a–f, the suffix, byte for byte.
  static func isMarkerName(_ name: String) -> Bool {
    let prefix = Array(".browserdrop-".utf8)
    let suffix = Array(".live".utf8)
    let bytes = Array(name.utf8)
    guard bytes.count == prefix.count + 16 + suffix.count, bytes.starts(with: prefix),
      bytes.suffix(suffix.count).elementsEqual(suffix)
    else { return false }
    return bytes[prefix.count..<(prefix.count + 16)].allSatisfy {
      (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
        || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0)
    }
  }

  /// The temporary name versions before attempts used, fixed per source path (FNV-1a), which a
  /// resume of their manifests needs to recognise.
  static func legacyTemporaryName(for source: String) -> String {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in source.utf8 {
      hash ^= UInt64(byte)
      hash &*= 0x100_0000_01b3
    }
    let hex = String(hash, radix: 16)
    return ".browserdrop-" + String(repeating: "0", count: 16 - hex.count) + hex + ".part"
  }
}

extension Substring {
  fileprivate func trimmingTrailingSpaces() -> Substring {
    var text = self
    while text.last == " " { text.removeLast() }
    return text
  }
}

import Glibc
internal import Synchronization

/// libmagic's answers (`image/png; charset=binary`), each parsed once.
///
/// A session sees a handful of distinct answers, and random or unknown uploads all get the same
/// one, yet parsing it anew (a `String` from the C string, splitting, trimming, lowercasing, the
/// kind of the type) cost about a third of a small upload's sniff, more than the screen's verdict
/// (perf, W2). So each distinct answer is parsed once and found again by its bytes, without
/// building a `String`.
final class MagicAnswers: Sendable {
  /// One answer, parsed.
  struct Answer: Sendable {
    /// libmagic's type, lowercased; `application/octet-stream` when it named none. A shared
    /// copy: every answer with this type holds the same string.
    let mimeType: String
    /// The charset (`nil` for binary).
    let charset: String?
    /// The kind of ``mimeType``.
    let kind: ContentKind
    /// Whether ``mimeType`` is one of libmagic's names for executables, which the sniffer
    /// believes only when ``ExecutableSignature`` agrees.
    let namesExecutable: Bool
  }

  private struct Entry: Sendable {
    let bytes: [UInt8]
    let answer: Answer
  }

  /// libmagic's names for executables.
  static let executableTypes: Set<String> = [
    "application/x-dosexec", "application/x-executable", "application/x-pie-executable",
    "application/x-sharedlib", "application/x-mach-binary", "application/x-object",
    "application/x-coredump", "application/vnd.microsoft.portable-executable",
    "application/x-ms-ne-executable", "application/x-lx-executable",
    "application/x-ms-w3-executable", "application/x-ms-w4-executable", "application/x-dosdriver",
    "application/x-msdownload",
  ]

  /// Answers by a hash of their bytes; a second answer with the same hash is parsed every time.
  private let entries = Mutex<[UInt64: Entry]>([:])
  private let capacity: Int
  /// Every answer's MIME type, as one shared copy per type.
  private let mimeTypes: InternedStrings

  /// The answer when libmagic gave none (an error): unknown content.
  let unknown: Answer

  /// Remembers up to `capacity` distinct answers; past that, new ones are parsed each time.
  init(capacity: Int) {
    self.capacity = capacity
    mimeTypes = InternedStrings(capacity: capacity)
    unknown = Self.parse(SniffResult.unknownType, mimeTypes: mimeTypes)
  }

  /// The parsed answer whose text is `cString` (libmagic's output, read before its next call).
  /// Waits only on the table's lock, held for a lookup or an insertion.
  func answer(_ cString: UnsafePointer<CChar>) -> Answer {
    let length = strlen(cString)
    let raw = UnsafeRawBufferPointer(start: cString, count: length)
    let key = Self.hash(raw)
    let found = entries.withLock { entries -> Answer? in
      guard let entry = entries[key], entry.bytes.elementsEqual(raw) else { return nil }
      return entry.answer
    }
    if let found { return found }
    let parsed = Self.parse(String(cString: cString), mimeTypes: mimeTypes)
    entries.withLock { entries in
      if entries[key] == nil && entries.count < capacity {
        entries[key] = Entry(bytes: Array(raw), answer: parsed)
      }
    }
    return parsed
  }

  /// The answer whose text is `text`, parsed now (for answers not read from libmagic).
  func answer(parsing text: String) -> Answer {
    Self.parse(text, mimeTypes: mimeTypes)
  }

  /// FNV-1a over the bytes.
  private static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
    var hash: UInt64 = 0xCBF2_9CE4_8422_2325
    for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3 }
    return hash
  }

  /// Splits `image/png; charset=binary` into a lowercased type and a charset (`nil` for binary).
  private static func parse(_ text: String, mimeTypes: InternedStrings) -> Answer {
    let parts = text.split(separator: ";", maxSplits: 1)
    var type = parts.first.map { $0.trimmingWhitespace().lowercased() } ?? ""
    // libmagic 5.44 names an empty buffer `application/x-empty`; older ones `inode/x-empty`.
    if type.hasSuffix("/x-empty") {
      type = SniffResult.emptyType
    } else if !type.contains("/") {
      type = SniffResult.unknownType
    }
    var charset: String?
    if parts.count == 2 {
      let parameter = parts[1].trimmingWhitespace().lowercased()
      if parameter.hasPrefix("charset=") {
        let value = String(parameter.dropFirst("charset=".count))
        if value != "binary" && !value.isEmpty { charset = value }
      }
    }
    let mimeType = mimeTypes.intern(type)
    return Answer(
      mimeType: mimeType, charset: charset, kind: ContentKind(mimeType: mimeType),
      namesExecutable: executableTypes.contains(mimeType))
  }
}

import FoundationEssentials

/// A relative upload path that passed protocol v1's rules: percent-decoded once, NFC,
/// `/`-separated, no empty, `.`/`..` or hidden segments, no backslash or control characters,
/// each segment at most 255 bytes and the whole at most 1024.
struct UploadPath: Sendable, Hashable, CustomStringConvertible {
  static let maximumSegmentBytes = 255
  static let maximumBytes = 1024

  /// The cleaned path.
  let value: String
  /// Its segments.
  let segments: [Substring]

  var description: String { value }

  /// The extension of the last segment, lowercased, without the dot (`""` when none).
  var fileExtension: String {
    guard let name = segments.last, let dot = name.lastIndex(of: "."), dot != name.startIndex
    else { return "" }
    return name[name.index(after: dot)...].lowercased()
  }

  /// The enclosing folders, shortest first: `a/b/c.txt` → `a`, `a/b`.
  var folders: [String] {
    var result: [String] = []
    var current = ""
    for segment in segments.dropLast() {
      current = current.isEmpty ? String(segment) : current + "/" + segment
      result.append(current)
    }
    return result
  }

  /// Validates an already-decoded path.
  init(validating text: String) throws(Refusal) {
    // ASCII is its own normal form and has no format characters: the common case skips
    // normalization and the Unicode property lookups.
    let isASCII = text.utf8.allSatisfy { $0 < 0x80 }
    let normalized = isASCII ? text : text.nfcNormalized
    guard !normalized.isEmpty else { throw Refusal(.invalidPath, "The path is missing.") }
    guard normalized.utf8.count <= Self.maximumBytes else {
      throw Refusal(.invalidPath, "The path is longer than \(Self.maximumBytes) bytes.")
    }
    if isASCII {
      for byte in normalized.utf8 {
        if byte < 0x20 || byte == 0x7F {
          throw Refusal(.invalidPath, "The path contains a control character.")
        }
        if byte == UInt8(ascii: "\\") {
          throw Refusal(.invalidPath, "The path contains a backslash.")
        }
      }
    } else {
      for scalar in normalized.unicodeScalars {
        let category = scalar.properties.generalCategory
        if category == .control || category == .format {
          throw Refusal(.invalidPath, "The path contains a control character.")
        }
        if scalar == "\\" { throw Refusal(.invalidPath, "The path contains a backslash.") }
      }
    }
    // Bytes, not Characters: a combining mark after `/` or `.` joins it into another Character.
    if normalized.utf8.first == UInt8(ascii: "/") {
      throw Refusal(.invalidPath, "The path must be relative.")
    }
    // Split on the `/` scalar: split on Characters, `/` followed by a combining mark (or after a
    // prepend character such as U+0D4E) is not a separator, hiding `..` and empty segments.
    let segments = normalized.unicodeScalars.split(separator: "/", omittingEmptySubsequences: false)
      .map(Substring.init)
    for segment in segments {
      if segment.isEmpty { throw Refusal(.invalidPath, "The path has an empty segment.") }
      if segment.utf8.first == UInt8(ascii: ".") {
        throw Refusal(.invalidPath, "Hidden names and . or .. segments are not accepted.")
      }
      if segment.utf8.count > Self.maximumSegmentBytes {
        throw Refusal(.invalidPath, "A name in the path is longer than 255 bytes.")
      }
    }
    self.value = normalized
    self.segments = segments
  }

  /// Finds the single `path` parameter in a query string and validates it.
  /// The query is percent-decoded once; `+` stays a plus.
  init(query: Substring) throws(Refusal) {
    var found: Substring?
    for parameter in query.split(separator: "&", omittingEmptySubsequences: true) {
      let parts = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
      guard parts[0] == "path" else { continue }
      if found != nil { throw Refusal(.invalidPath, "The path parameter is given more than once.") }
      found = parts.count == 2 ? parts[1] : ""
    }
    guard let found else { throw Refusal(.invalidPath, "The path parameter is missing.") }
    guard let decoded = PercentDecoding.decode(found) else {
      throw Refusal(.invalidPath, "The path is not valid percent-encoded UTF-8.")
    }
    try self.init(validating: decoded)
  }
}

/// Percent-decoding, once, into strict UTF-8.
enum PercentDecoding {
  /// Decodes `%XX` escapes; `nil` for a malformed escape or bytes that are not UTF-8.
  static func decode(_ text: Substring) -> String? {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(text.utf8.count)
    var iterator = text.utf8.makeIterator()
    while let byte = iterator.next() {
      if byte == UInt8(ascii: "%") {
        guard let high = iterator.next().flatMap(hexValue),
          let low = iterator.next().flatMap(hexValue)
        else { return nil }
        bytes.append(high << 4 | low)
      } else {
        bytes.append(byte)
      }
    }
    return String(validating: bytes, as: UTF8.self)
  }

  private static func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case 0x30...0x39: byte - 0x30
    case 0x41...0x46: byte - 0x41 + 10
    case 0x61...0x66: byte - 0x61 + 10
    default: nil
    }
  }
}

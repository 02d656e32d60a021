/// A client-made name for one resumable upload (`upload=` in the query): 128 random bits, as
/// 22 characters of URL-safe base64 without padding, or 32 lowercase hex digits. Checked
/// strictly (one spelling per value) because it becomes a file name in the resumable store.
struct UploadID: Sendable, Hashable, CustomStringConvertible {
  /// The id as the client spelled it; safe as a file name.
  let value: String

  var description: String { value }

  /// Validates an id as it appears in the query (it needs no percent-decoding: every accepted
  /// character is unreserved).
  init(validating text: Substring) throws(Refusal) {
    let bytes = Array(text.utf8)
    if bytes.count == 32, bytes.allSatisfy(Self.isLowerHex) {
      value = String(text)
      return
    }
    // 22 base64 digits carry 132 bits: the last one's low 4 bits must be zero (its value a
    // multiple of 16: A, Q, g or w), or two spellings would name the same 128 bits.
    guard bytes.count == 22, bytes.allSatisfy({ Self.base64Value($0) != nil }),
      let last = bytes.last.flatMap(Self.base64Value), last & 0x0F == 0
    else {
      throw Refusal(.invalidUploadID)
    }
    value = String(text)
  }

  /// Finds the single `upload` parameter in a query string: `nil` when there is none.
  static func find(inQuery query: Substring) throws(Refusal) -> UploadID? {
    var found: UploadID?
    for parameter in query.split(separator: "&", omittingEmptySubsequences: true) {
      let parts = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
      guard parts[0] == "upload" else { continue }
      if found != nil {
        throw Refusal(.invalidUploadID, "The upload parameter is given more than once.")
      }
      found = try UploadID(validating: parts.count == 2 ? parts[1] : "")
    }
    return found
  }

  private static func isLowerHex(_ byte: UInt8) -> Bool {
    (0x30...0x39).contains(byte) || (0x61...0x66).contains(byte)
  }

  private static func base64Value(_ byte: UInt8) -> UInt8? {
    switch byte {
    case 0x41...0x5A: byte - 0x41
    case 0x61...0x7A: byte - 0x61 + 26
    case 0x30...0x39: byte - 0x30 + 52
    case UInt8(ascii: "-"): 62
    case UInt8(ascii: "_"): 63
    default: nil
    }
  }
}

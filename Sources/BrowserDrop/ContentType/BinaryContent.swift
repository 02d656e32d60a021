import Glibc

/// Whether libmagic would read a buffer as binary data rather than text, decided without it.
enum BinaryContent {
  /// `true` only when every text reading libmagic tries (ASCII, UTF-8 with or without a BOM,
  /// UTF-7, UTF-16 and UTF-32 after a BOM, ISO-8859, extended ASCII, EBCDIC; encoding.c, 5.44)
  /// fails, both on the whole buffer and with trailing NULs trimmed (as its text pass reads
  /// it): a NUL byte, which none of them accepts (EBCDIC maps it to NUL too), comes before the
  /// last non-NUL byte, and the buffer does not start with a byte-order mark or `+/v` (UTF-7).
  static func looksBinaryToLibmagic(_ bytes: UnsafeRawBufferPointer) -> Bool {
    guard let base = bytes.baseAddress, bytes.count >= 4 else { return false }
    let start = (bytes[0], bytes[1], bytes[2], bytes[3])
    switch start {
    case (0xFF, 0xFE, _, _), (0xFE, 0xFF, _, _), (0xEF, 0xBB, 0xBF, _), (0x00, 0x00, 0xFE, 0xFF),
      (0x2B, 0x2F, 0x76, _):
      return false
    default:
      break
    }
    guard let nul = memchr(base, 0, bytes.count) else { return false }
    let first = UnsafeRawPointer(nul) - base
    var last = bytes.count - 1
    while last > first && bytes[last] == 0 { last -= 1 }
    return last > first
  }
}

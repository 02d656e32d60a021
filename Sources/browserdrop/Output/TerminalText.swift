import FoundationEssentials
import Glibc

/// Text that came from a request (names, headers) made safe for a terminal, and the terminal's
/// size.
enum TerminalText {
  /// Replaces control characters (C0, DEL, C1) and bidirectional overrides with visible
  /// `\u{…}` escapes, so a file name can't move the cursor, change colours or reorder the line.
  static func escaped(_ text: String) -> String {
    var result = ""
    result.unicodeScalars.reserveCapacity(text.unicodeScalars.count)
    for scalar in text.unicodeScalars {
      if isUnsafe(scalar) {
        result += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
      } else {
        result.unicodeScalars.append(scalar)
      }
    }
    return result
  }

  /// Whether `scalar` must not reach a terminal raw.
  static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
    switch scalar.value {
    case 0x00...0x1F, 0x7F...0x9F: true
    case 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069, 0x2028, 0x2029: true
    default: false
    }
  }

  /// `'value'`, escaped, as error messages quote what the user typed.
  static func quoted(_ text: String) -> String {
    "'" + escaped(text) + "'"
  }

  /// The terminal's width in columns (80 when it can't be told).
  static func columns(of descriptor: Int32 = STDOUT_FILENO) -> Int {
    var size = winsize()
    if ioctl(descriptor, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 {
      return Int(size.ws_col)
    }
    return 80
  }
}

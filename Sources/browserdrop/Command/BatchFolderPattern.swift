import FoundationEssentials
import Glibc

/// The name of a batch's own folder at the destination: text with `{date}`, `{time}` and `{n}`.
struct BatchFolderPattern: Sendable, Equatable {
  /// The pattern as written.
  let text: String

  /// Kiosk mode's default: `2025-03-14 09.26.53`.
  static let kioskDefault = BatchFolderPattern(checked: "{date} {time}")

  private init(checked text: String) {
    self.text = text
  }

  /// Checks a pattern: known placeholders only, no `/`, not empty, not `.` or `..` and not hidden.
  init(_ text: String) throws(UsageError) {
    let flag = "--batch-folder"
    guard !text.isEmpty else {
      throw .badValue(flag, text, "a folder name is needed, for example \"{date} {time}\"")
    }
    guard !text.contains("/"), !text.hasPrefix("."), !text.contains(where: \.isASCIIControl) else {
      throw .badValue(
        flag, text, "it must be a single folder name (no \"/\", not starting with \".\")")
    }
    var rest = Substring(text)
    while let open = rest.firstIndex(of: "{") {
      guard let close = rest[open...].firstIndex(of: "}") else {
        throw .badValue(flag, text, "a \"{\" is not closed")
      }
      let name = rest[rest.index(after: open)..<close]
      guard ["date", "time", "n"].contains(name) else {
        throw .badValue(flag, text, "unknown placeholder {\(name)}; use {date}, {time} or {n}")
      }
      rest = rest[rest.index(after: close)...]
    }
    self.text = text
  }

  /// Refuses what an SMB share would refuse in every folder made from this pattern: the
  /// characters `\ : * ? " < > |` and a trailing dot or space. Placeholders expand to digits,
  /// dashes and dots between digits, so only the literal text is checked.
  func checkForSMB() throws(UsageError) {
    let flag = "--batch-folder"
    var literal = ""
    var rest = Substring(text)
    while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
      literal += rest[..<open]
      rest = rest[rest.index(after: close)...]
    }
    literal += rest
    if let bad = literal.first(where: { "\\:*?\"<>|".contains($0) }) {
      throw .badValue(
        flag, text,
        "SMB doesn't allow the character \(TerminalText.quoted(String(bad))) in a name; "
          + "leave out \\ : * ? \" < > |")
    }
    if let last = text.last, last == "." || last == " " {
      throw .badValue(
        flag, text, "SMB doesn't allow a name ending in \(last == "." ? "a dot" : "a space")")
    }
  }

  /// The folder name for batch number `number` closed at `date` (local time).
  func folderName(date: Date, number: Int) -> String {
    // The system's time zone (TZ, /etc/localtime): FoundationEssentials' TimeZone.current is GMT.
    var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
    var parts = tm()
    localtime_r(&seconds, &parts)
    func two(_ value: Int32) -> String {
      value < 10 ? "0\(value)" : "\(value)"
    }
    let day = "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))"
    let time = "\(two(parts.tm_hour)).\(two(parts.tm_min)).\(two(parts.tm_sec))"
    return
      text
      .replacing("{date}", with: day)
      .replacing("{time}", with: time)
      .replacing("{n}", with: "\(number)")
  }
}

extension Character {
  fileprivate var isASCIIControl: Bool {
    unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }
  }
}

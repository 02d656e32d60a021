import BrowserDrop
import BrowserDropForwarding
import Glibc

/// How the flags' values are read from their text. Each reader is pure (no file, folder or
/// environment is looked at) and refuses a bad value with a usage error naming the flag and
/// saying what it expects.
enum FlagValue {
  /// A reader of a flag's text: the flag as written and its value.
  typealias Reader<Value> = @Sendable (_ flag: String, _ text: String) throws(UsageError) -> Value

  /// The text as written, for a value the validation step checks against the system.
  static func asWritten(_ flag: String, _ text: String) -> String {
    text
  }

  /// Any text but the empty one; `expected` says what is missing.
  static func nonEmpty(_ expected: String) -> Reader<String> {
    { flag, text throws(UsageError) in
      guard !text.isEmpty else { throw .badValue(flag, text, expected) }
      return text
    }
  }

  /// A whole number in `range`.
  static func integer(in range: ClosedRange<Int>, expected: String) -> Reader<Int> {
    { flag, text throws(UsageError) in
      guard let number = Int(text), range.contains(number) else {
        throw .badValue(flag, text, expected)
      }
      return number
    }
  }

  /// A byte count (`ByteSize`), above zero unless `allowZero`.
  static func size(allowZero: Bool) -> Reader<Int> {
    { flag, text throws(UsageError) in
      guard let bytes = ByteSize.parse(text), allowZero || bytes > 0 else {
        throw .badValue(flag, text, "a size in bytes, or with a unit: 500K, 20M, 8G, 1T")
      }
      return bytes
    }
  }

  /// A number of seconds above zero and at most a year.
  static func seconds(_ flag: String, _ text: String) throws(UsageError) -> Double {
    guard let number = Double(text), number.isFinite, number > 0, number <= 86_400 * 365 else {
      throw .badValue(flag, text, "a number of seconds greater than 0")
    }
    return number
  }

  /// An IPv4 or IPv6 address, as written.
  static func ipAddress(_ flag: String, _ text: String) throws(UsageError) -> String {
    var v4 = in_addr()
    var v6 = in6_addr()
    guard inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1 else {
      throw .badValue(flag, text, "an IPv4 or IPv6 address such as 192.168.1.20 or ::")
    }
    return text
  }

  /// Extensions separated by commas, each lowercased and without its leading dot.
  static func extensions(_ flag: String, _ text: String) throws(UsageError) -> Set<String> {
    var result = Set<String>()
    for part in text.split(separator: ",", omittingEmptySubsequences: false) {
      var item = part.trimmingWhitespace().lowercased()
      if item.hasPrefix(".") { item.removeFirst() }
      guard !item.isEmpty, !item.contains(where: { "/\\.*?".contains($0) || $0.isWhitespace })
      else {
        throw .badValue(
          flag, text, "extensions without dots, separated by commas, e.g. pdf,jpg,mp3")
      }
      result.insert(item)
    }
    return result
  }

  /// A BCP 47 language tag in its common shape: `en`, `pt-BR`, `zh-Hant-TW`.
  static func language(_ flag: String, _ text: String) throws(UsageError) -> String {
    let parts = text.split(separator: "-", omittingEmptySubsequences: false)
    let valid =
      !text.isEmpty && text.count <= 35
      && parts.allSatisfy { part in
        (1...8).contains(part.count)
          && part.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) }
      } && parts[0].allSatisfy(\.isLetter) && (2...8).contains(parts[0].count)
    guard valid else { throw .badValue(flag, text, "a language code such as en, es or pt-BR") }
    return text
  }

  /// A colour written `#RRGGBB`.
  static func accent(_ flag: String, _ text: String) throws(UsageError) -> String {
    guard text.count == 7, text.hasPrefix("#"), text.dropFirst().allSatisfy(\.isHexDigit) else {
      throw .badValue(flag, text, "a colour written as #RRGGBB, e.g. #0A84FF")
    }
    return text
  }

  /// `on` or `off`, in any case.
  static func onOff(_ flag: String, _ text: String) throws(UsageError) -> Bool {
    switch text.lowercased() {
    case "on": return true
    case "off": return false
    default: throw .badValue(flag, text, "on or off")
    }
  }

  /// `disguised`, `off`, or a comma-separated list of MIME patterns (`audio/*,application/pdf`).
  static func contentPolicy(_ flag: String, _ text: String) throws(UsageError) -> ContentPolicy {
    switch text.lowercased() {
    case "disguised": return .rejectDisguised
    case "off": return .off
    default:
      let patterns = text.split(separator: ",").map {
        $0.trimmingWhitespace().lowercased()
      }
      let shape = /^(\*|[a-z0-9][a-z0-9.+-]*)\/(\*|[a-z0-9][a-z0-9.+-]*)$/
      guard !patterns.isEmpty, patterns.allSatisfy({ $0.wholeMatch(of: shape) != nil }) else {
        throw .badValue(
          flag, text, "disguised, off, or MIME patterns such as audio/*,application/pdf")
      }
      return .strict(allowedTypes: patterns)
    }
  }

  /// `rename`, `replace` or `fail`, in any case.
  static func collisionPolicy(
    _ flag: String, _ text: String
  ) throws(UsageError) -> CollisionPolicy {
    switch text.lowercased() {
    case "rename": return .rename
    case "replace": return .replace
    case "fail": return .fail
    default: throw .badValue(flag, text, "one of rename, replace or fail")
    }
  }
}

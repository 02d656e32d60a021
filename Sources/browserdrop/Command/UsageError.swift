/// A mistake on the command line: exit status 2 and a message naming the flag or value.
struct UsageError: Error, CustomStringConvertible {
  /// The sentence shown after `browserdrop: `.
  let message: String

  init(_ message: String) {
    self.message = message
  }

  /// A flag that needs a value got none.
  static func missingValue(_ flag: String, _ what: String) -> UsageError {
    UsageError("\(flag) needs a value: \(what).")
  }

  /// A flag got a value it cannot use.
  static func badValue(_ flag: String, _ value: String, _ expected: String) -> UsageError {
    UsageError("\(flag) got \(TerminalText.quoted(value)): \(expected).")
  }

  var description: String { message }
}

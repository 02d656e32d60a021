/// One flag of the command, declared once: its names, the value it takes, its help and how its
/// value is read. The parser, `--help` and the messages of a mistake all derive from this one
/// declaration, in the spirit of swift-argument-parser's `@Option` and `@Flag`.
///
/// Reading a value is pure: it checks the text and stores a typed value in `ParsedArguments`.
/// Whatever needs the system (files, folders, the environment) is checked later, by
/// `ParsedArguments.validated(environment:)`.
struct Flag: Sendable {
  /// Reads a value flag's text (the flag as written, then its value) into the arguments.
  typealias Read =
    @Sendable (_ flag: String, _ text: String, inout ParsedArguments) throws(UsageError) -> Void

  /// What the flag does when it appears on the command line.
  enum Kind: Sendable {
    /// Takes a value (`--port 80` or `--port=80`): `label` names it in `--help`, `expected`
    /// describes it when it is missing, `read` checks the text and stores it.
    case option(label: String, expected: String, read: Read)
    /// Takes no value and sets something (`--json`).
    case toggle(set: @Sendable (inout ParsedArguments) -> Void)
    /// Stops parsing at once and asks for something else than a run (`--help`, `--version`).
    /// These win over any mistake elsewhere on the line, as in swift-argument-parser.
    case request(ParsedRequest)
  }

  /// The long name, `--port`.
  let name: String
  /// A one-letter name such as `-h`, when the flag has one.
  let shortName: String?
  /// How the flag reads.
  let kind: Kind
  /// The part of `--help` the flag is listed in.
  let section: HelpSection
  /// The flag's help, one entry a line, wrapped as it is to be shown in the right-hand column.
  let help: [String]

  /// A flag that takes a value: `parse` turns the text into a `Value` (or throws a usage error
  /// naming the flag), which is stored at `keyPath`.
  static func option<Value>(
    _ name: String, _ label: String, expected: String, section: HelpSection, help: [String],
    parse: @escaping @Sendable (_ flag: String, _ text: String) throws(UsageError) -> Value,
    into keyPath: any WritableKeyPath<ParsedArguments, Value> & Sendable
  ) -> Flag {
    Flag(
      name: name, shortName: nil,
      kind: .option(label: label, expected: expected) { flag, text, arguments throws(UsageError) in
        arguments[keyPath: keyPath] = try parse(flag, text)
      },
      section: section, help: help)
  }

  /// A flag that takes a value and keeps every one given, in order, at `keyPath`: for values
  /// the validation step checks against the system, where each one given was checked before.
  static func option<Value>(
    _ name: String, _ label: String, expected: String, section: HelpSection, help: [String],
    parse: @escaping @Sendable (_ flag: String, _ text: String) throws(UsageError) -> Value,
    appendingTo keyPath: any WritableKeyPath<ParsedArguments, [Value]> & Sendable
  ) -> Flag {
    Flag(
      name: name, shortName: nil,
      kind: .option(label: label, expected: expected) { flag, text, arguments throws(UsageError) in
        arguments[keyPath: keyPath].append(try parse(flag, text))
      },
      section: section, help: help)
  }

  /// A flag without a value that sets `keyPath` to `value`.
  static func toggle(
    _ name: String, section: HelpSection, help: [String],
    setting keyPath: any WritableKeyPath<ParsedArguments, Bool> & Sendable, to value: Bool
  ) -> Flag {
    Flag(
      name: name, shortName: nil, kind: .toggle { $0[keyPath: keyPath] = value },
      section: section, help: help)
  }

  /// A flag that asks for `request` instead of a run.
  static func request(
    _ name: String, shortName: String? = nil, _ request: ParsedRequest, section: HelpSection,
    help: [String]
  ) -> Flag {
    Flag(name: name, shortName: shortName, kind: .request(request), section: section, help: help)
  }

  /// Every name the flag answers to, the short one first.
  var names: [String] {
    (shortName.map { [$0] } ?? []) + [name]
  }

  /// Whether the flag takes a value.
  var takesValue: Bool {
    if case .option = kind { return true }
    return false
  }

  /// The flag as `--help` shows it on the left: `-h, --help`, `--port N`.
  var helpLabel: String {
    let names = names.joined(separator: ", ")
    guard case .option(let label, _, _) = kind else { return names }
    return names + " " + label
  }
}

/// What the command line may ask for instead of a run.
enum ParsedRequest: Sendable {
  /// Print the help text.
  case help
  /// Print the version.
  case version
}

/// The parts of `--help` that list flags, in the order shown.
enum HelpSection: String, CaseIterable, Sendable {
  case destination = "DESTINATION"
  case server = "SERVER"
  case limits = "LIMITS"
  case page = "PAGE"
  case kiosk = "KIOSK"
  case operations = "OPERATIONS"
  case output = "OUTPUT"
  case general = "GENERAL"
}

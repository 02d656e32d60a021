/// What the command line asks for, once validated.
enum ParsedCommand: Sendable {
  /// Serve with these options.
  case run(CommandOptions)
  /// Print the help text.
  case help
  /// Print the version.
  case version
}

/// What the command line asks for, as parsed: before anything is checked against the system.
enum ParsedCommandLine: Sendable {
  /// Serve with these arguments, once `ParsedArguments.validated(environment:)` accepts them.
  case run(ParsedArguments)
  /// Print the help text or the version.
  case request(ParsedRequest)
}

/// Reads the command line with the flags of `CommandFlags`, the way swift-argument-parser does:
/// `--flag value` and `--flag=value`, `-h`/`--help`, `--version`, `--` ends the options, and
/// every mistake names the flag.
enum ArgumentParser {
  /// Parses `arguments` (without the program name), then validates them against the system and
  /// `environment`: the two steps before a run, together.
  static func parse(
    _ arguments: [String], environment: [String: String]
  ) throws(UsageError) -> ParsedCommand {
    switch try parseWithoutValidating(arguments) {
    case .request(.help): return .help
    case .request(.version): return .version
    case .run(let parsed): return .run(try parsed.validated(environment: environment))
    }
  }

  /// Parses `arguments` (without the program name) without any I/O: each flag's value is read
  /// and checked on its own, in two passes so that a mistake in the line's shape (an unknown
  /// flag, a missing value) is reported before a bad value.
  static func parseWithoutValidating(
    _ arguments: [String]
  ) throws(UsageError) -> ParsedCommandLine {
    // Like swift-argument-parser, -h, --help and --version win over any other mistake
    // (`--help --frobnicate`, `--port --help`); only what follows `--` is not an option.
    let beforeEnd = arguments.prefix { $0 != "--" }
    for flag in CommandFlags.all {
      if case .request(let request) = flag.kind, beforeEnd.contains(where: flag.names.contains) {
        return .request(request)
      }
    }
    var parsed = ParsedArguments()
    for (flag, value) in try occurrences(in: arguments) {
      switch flag.kind {
      case .option(_, _, let read): try read(flag.name, value ?? "", &parsed)
      case .toggle(let set): set(&parsed)
      // Found by the scan above before anything else is looked at.
      case .request(let request): return .request(request)
      }
    }
    return .run(parsed)
  }

  /// Every flag on the line with its value, in order; throws at the first flag the command
  /// doesn't have, value that is missing or argument that is not a flag.
  private static func occurrences(
    in arguments: [String]
  ) throws(UsageError) -> [(flag: Flag, value: String?)] {
    var found: [(flag: Flag, value: String?)] = []
    var index = 0
    while index < arguments.count {
      let argument = arguments[index]
      index += 1
      if argument == "--" {
        if index < arguments.count {
          throw UsageError("Unexpected argument \(TerminalText.quoted(arguments[index])).")
        }
        break
      }
      if !argument.hasPrefix("--"), let flag = CommandFlags.named(argument) {
        found.append((flag, nil))
        continue
      }
      guard argument.hasPrefix("--") else {
        if argument.hasPrefix("-"), argument.count > 1 {
          throw UsageError("Unknown option \(TerminalText.quoted(argument)).")
        }
        throw UsageError(
          "Unexpected argument \(TerminalText.quoted(argument)); "
            + "the destination is given with --to.")
      }
      var name = argument
      var inline: String?
      if let equals = argument.firstIndex(of: "=") {
        name = String(argument[..<equals])
        inline = String(argument[argument.index(after: equals)...])
      }
      guard let flag = CommandFlags.named(name) else {
        throw UsageError("Unknown option \(TerminalText.quoted(name)).\(suggestion(for: name))")
      }
      guard case .option(_, let expected, _) = flag.kind else {
        if inline != nil { throw UsageError("\(name) doesn't take a value.") }
        found.append((flag, nil))
        continue
      }
      if let inline {
        found.append((flag, inline))
      } else if index < arguments.count, !looksLikeFlag(arguments[index]) {
        found.append((flag, arguments[index]))
        index += 1
      } else {
        throw .missingValue(name, expected)
      }
    }
    return found
  }

  /// Whether `text`, found where a value is due, is rather the next flag: a value may start
  /// with `-` or `--` unless it names one of the command's flags.
  private static func looksLikeFlag(_ text: String) -> Bool {
    if !text.hasPrefix("--") { return CommandFlags.named(text) != nil }
    return CommandFlags.named(String(text.prefix { $0 != "=" })) != nil
  }

  private static func suggestion(for name: String) -> String {
    var best: (flag: String, distance: Int)?
    for flag in CommandFlags.all.map(\.name).sorted() {
      let distance = editDistance(flag, name)
      if distance < (best?.distance ?? Int.max) { best = (flag, distance) }
    }
    guard let best, best.distance <= 2 else { return "" }
    return " Did you mean '\(best.flag)'?"
  }

  private static func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a)
    let b = Array(b)
    var row = Array(0...b.count)
    for i in 1...max(a.count, 1) where !a.isEmpty {
      var previous = row[0]
      row[0] = i
      for j in stride(from: 1, through: b.count, by: 1) {
        let saved = row[j]
        row[j] = min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] == b[j - 1] ? 0 : 1))
        previous = saved
      }
    }
    return row[b.count]
  }
}

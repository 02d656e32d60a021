import BrowserDrop
import BrowserDropForwarding
import FoundationEssentials
import Glibc

/// What the command line asks for.
enum ParsedCommand: Sendable {
  /// Serve with these options.
  case run(CommandOptions)
  /// Print the help text.
  case help
  /// Print the version.
  case version
}

/// Parses the command line the way swift-argument-parser does: `--flag value` and `--flag=value`,
/// `-h`/`--help`, `--version`, `--` ends the options, and every mistake names the flag.
struct ArgumentParser {
  private enum Arity {
    case flag
    case value(String)
  }

  /// Every option, with a short description of its value for error messages.
  private static let options: [String: Arity] = [
    "--to": .value("a folder or an smb:// address"),
    "--bind": .value("an IP address to listen on"),
    "--port": .value("a port number"),
    "--staging": .value("a folder"),
    "--allow": .value("extensions separated by commas"),
    "--max-file-size": .value("a size such as 500K, 20M, 8G or 1T"),
    "--reserve": .value("a size such as 500M or 1G"),
    "--max-connections": .value("a whole number"),
    "--max-concurrent": .value("a whole number"),
    "--idle-timeout": .value("a number of seconds"),
    "--durability": .value("on or off"),
    "--content-check": .value("disguised, off, or MIME patterns such as audio/*,application/pdf"),
    "--title": .value("the page's title"),
    "--language": .value("a language code such as en or pt-BR"),
    "--accent": .value("a colour as #RRGGBB"),
    "--strings": .value("a JSON file"),
    "--page": .value("a folder holding index.html"),
    "--on-conflict": .value("rename, replace or fail"),
    "--kiosk": .flag,
    "--quiet-period": .value("a number of seconds"),
    "--batch-folder": .value("a folder name pattern such as \"{date} {time}\""),
    "--smb-password-file": .value("a file holding the SMB password"),
    "--name": .value("a name to advertise as NAME.local"),
    "--metrics": .value("a port or ADDRESS:PORT"),
    "--json": .flag,
    "--no-qr": .flag,
    "--help": .flag,
    "--version": .flag,
  ]

  /// Parses `arguments` (without the program name).
  static func parse(
    _ arguments: [String], environment: [String: String]
  ) throws(UsageError)
    -> ParsedCommand
  {
    // Like swift-argument-parser, -h, --help and --version win over any other mistake
    // (`--help --frobnicate`, `--port --help`); only what follows `--` is not an option.
    let beforeEnd = arguments.prefix { $0 != "--" }
    if beforeEnd.contains(where: { $0 == "-h" || $0 == "--help" }) { return .help }
    if beforeEnd.contains("--version") { return .version }
    var values: [(flag: String, value: String?)] = []
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
      if argument == "-h" {
        values.append(("--help", nil))
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
      guard let arity = options[name] else {
        throw UsageError("Unknown option \(TerminalText.quoted(name)).\(suggestion(for: name))")
      }
      switch arity {
      case .flag:
        if inline != nil { throw UsageError("\(name) doesn't take a value.") }
        values.append((name, nil))
      case .value(let what):
        if let inline {
          values.append((name, inline))
        } else if index < arguments.count, !looksLikeOption(arguments[index]) {
          values.append((name, arguments[index]))
          index += 1
        } else {
          throw .missingValue(name, what)
        }
      }
    }
    return .run(try Self.options(from: values, environment: environment))
  }

  private static func looksLikeOption(_ text: String) -> Bool {
    text == "-h" || (text.hasPrefix("--") && options[String(text.prefix { $0 != "=" })] != nil)
  }

  private static func suggestion(for name: String) -> String {
    var best: (flag: String, distance: Int)?
    for flag in options.keys.sorted() {
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

  // MARK: - Values

  private static func options(
    from values: [(flag: String, value: String?)], environment: [String: String]
  ) throws(UsageError) -> CommandOptions {
    var options = CommandOptions()
    var destinationText: String?
    var quietPeriodGiven = false
    for (flag, value) in values {
      let value = value ?? ""
      switch flag {
      case "--to": destinationText = value
      case "--bind": options.bindAddress = try ipAddress(flag, value)
      case "--port":
        options.port = try integer(
          flag, value, in: 0...65535, expected: "a port number from 0 to 65535")
      case "--staging":
        guard !value.isEmpty else { throw .badValue(flag, value, "a folder") }
        let path = PathText.expandingTilde(value)
        options.stagingRoot = URL(filePath: path, directoryHint: .isDirectory).standardizedFileURL
      case "--allow": options.allowedExtensions = try extensions(flag, value)
      case "--max-file-size": options.maximumFileSize = try size(flag, value, allowZero: false)
      case "--reserve": options.reservedFreeSpace = try size(flag, value, allowZero: true)
      case "--max-connections":
        options.maximumConnections = try integer(
          flag, value, in: 1...100_000, expected: "a whole number of at least 1")
      case "--max-concurrent":
        options.maximumConcurrentUploads = try integer(
          flag, value, in: 1...64, expected: "a whole number from 1 to 64")
      case "--idle-timeout": options.idleTimeout = try seconds(flag, value)
      case "--durability": options.durability = try onOff(flag, value)
      case "--content-check": options.contentPolicy = try contentPolicy(flag, value)
      case "--title":
        guard !value.isEmpty else { throw .badValue(flag, value, "a title can't be empty") }
        options.pageSettings.title = value
      case "--language": options.pageSettings.language = try language(flag, value)
      case "--accent": options.pageSettings.accentColor = try accent(flag, value)
      case "--strings": options.pageSettings.strings = try strings(flag, value)
      case "--page": options.pageDirectory = try pageDirectory(flag, value)
      case "--on-conflict": options.collisionPolicy = try collisionPolicy(flag, value)
      case "--kiosk": options.kiosk = true
      case "--quiet-period":
        options.quietPeriod = try seconds(flag, value)
        quietPeriodGiven = true
      case "--batch-folder": options.batchFolder = try BatchFolderPattern(value)
      case "--smb-password-file":
        guard !value.isEmpty else { throw .badValue(flag, value, "a file") }
        options.smbPasswordFile = value
      case "--name": options.advertisedName = try OperationsFlags.name(flag, value)
      case "--metrics": options.metrics = try OperationsFlags.metrics(flag, value)
      case "--json": options.json = true
      case "--no-qr": options.drawsQRCode = false
      default: break
      }
    }
    // The bundled page ignores a key it doesn't know; a page of one's own may use any.
    if options.pageDirectory == nil,
      let unknown = options.pageSettings.strings.keys.sorted().first(where: {
        !PageStrings.keys.contains($0)
      })
    {
      throw UsageError(
        "--strings: the page has no text named \(TerminalText.quoted(unknown)); the keys are "
          + PageStrings.keys.joined(separator: ", ") + ".")
    }
    if quietPeriodGiven, !options.kiosk {
      throw UsageError("--quiet-period only applies with --kiosk.")
    }
    if let destinationText {
      options.destination = try DestinationChoice.parse(
        destinationText, passwordFile: options.smbPasswordFile, environment: environment)
    }
    if case .smb = options.destination, let pattern = options.batchFolder {
      try pattern.checkForSMB()
    }
    if options.smbPasswordFile != nil {
      guard case .smb(_, let credentials) = options.destination else {
        throw UsageError("--smb-password-file needs an smb:// destination in --to.")
      }
      // A guest address signs in without a password: a file given for it would be ignored.
      guard credentials != nil else {
        throw UsageError(
          "--smb-password-file needs a user in the --to address, as in smb://user@host/share.")
      }
    }
    if options.kiosk, options.destination == nil {
      throw UsageError("--kiosk needs a destination: add --to FOLDER or --to smb://host/share.")
    }
    return options
  }

  private static func integer(
    _ flag: String, _ value: String, in range: ClosedRange<Int>, expected: String
  ) throws(UsageError) -> Int {
    guard let number = Int(value), range.contains(number) else {
      throw .badValue(flag, value, expected)
    }
    return number
  }

  private static func size(
    _ flag: String, _ value: String, allowZero: Bool
  ) throws(UsageError) -> Int {
    guard let bytes = ByteSize.parse(value), allowZero || bytes > 0 else {
      throw .badValue(flag, value, "a size in bytes, or with a unit: 500K, 20M, 8G, 1T")
    }
    return bytes
  }

  private static func seconds(_ flag: String, _ value: String) throws(UsageError) -> Double {
    guard let number = Double(value), number.isFinite, number > 0, number <= 86_400 * 365 else {
      throw .badValue(flag, value, "a number of seconds greater than 0")
    }
    return number
  }

  private static func ipAddress(_ flag: String, _ value: String) throws(UsageError) -> String {
    var v4 = in_addr()
    var v6 = in6_addr()
    guard inet_pton(AF_INET, value, &v4) == 1 || inet_pton(AF_INET6, value, &v6) == 1 else {
      throw .badValue(flag, value, "an IPv4 or IPv6 address such as 192.168.1.20 or ::")
    }
    return value
  }

  private static func extensions(_ flag: String, _ value: String) throws(UsageError) -> Set<String>
  {
    var result = Set<String>()
    for part in value.split(separator: ",", omittingEmptySubsequences: false) {
      var item = part.trimmingWhitespace().lowercased()
      if item.hasPrefix(".") { item.removeFirst() }
      guard !item.isEmpty, !item.contains(where: { "/\\.*?".contains($0) || $0.isWhitespace })
      else {
        throw .badValue(
          flag, value, "extensions without dots, separated by commas, e.g. pdf,jpg,mp3")
      }
      result.insert(item)
    }
    return result
  }

  private static func language(_ flag: String, _ value: String) throws(UsageError) -> String {
    let parts = value.split(separator: "-", omittingEmptySubsequences: false)
    let valid =
      !value.isEmpty && value.count <= 35
      && parts.allSatisfy { part in
        (1...8).contains(part.count)
          && part.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) }
      } && parts[0].allSatisfy(\.isLetter) && (2...8).contains(parts[0].count)
    guard valid else { throw .badValue(flag, value, "a language code such as en, es or pt-BR") }
    return value
  }

  private static func accent(_ flag: String, _ value: String) throws(UsageError) -> String {
    guard value.count == 7, value.hasPrefix("#"), value.dropFirst().allSatisfy(\.isHexDigit) else {
      throw .badValue(flag, value, "a colour written as #RRGGBB, e.g. #0A84FF")
    }
    return value
  }

  private static func strings(
    _ flag: String, _ value: String
  ) throws(UsageError) -> [String: String] {
    guard let data = FileManager.default.contents(atPath: value) else {
      throw .badValue(flag, value, "the file can't be read")
    }
    guard let strings = try? JSONDecoder().decode([String: String].self, from: data) else {
      throw .badValue(
        flag, value, "it must hold a JSON object of strings, e.g. {\"title\": \"Drop here\"}")
    }
    return strings
  }

  private static func pageDirectory(_ flag: String, _ value: String) throws(UsageError) -> URL {
    let path = PathText.expandingTilde(value)
    var isDirectory = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory,
      FileManager.default.fileExists(
        atPath: path.hasSuffix("/") ? path + "index.html" : path + "/index.html")
    else {
      throw .badValue(flag, value, "a folder holding index.html")
    }
    return URL(filePath: path, directoryHint: .isDirectory).standardizedFileURL
  }

  private static func onOff(_ flag: String, _ value: String) throws(UsageError) -> Bool {
    switch value.lowercased() {
    case "on": return true
    case "off": return false
    default: throw .badValue(flag, value, "on or off")
    }
  }

  /// `disguised`, `off`, or a comma-separated list of MIME patterns (`audio/*,application/pdf`).
  private static func contentPolicy(
    _ flag: String, _ value: String
  ) throws(UsageError) -> ContentPolicy {
    switch value.lowercased() {
    case "disguised": return .rejectDisguised
    case "off": return .off
    default:
      let patterns = value.split(separator: ",").map {
        $0.trimmingWhitespace().lowercased()
      }
      let shape = /^(\*|[a-z0-9][a-z0-9.+-]*)\/(\*|[a-z0-9][a-z0-9.+-]*)$/
      guard !patterns.isEmpty, patterns.allSatisfy({ $0.wholeMatch(of: shape) != nil }) else {
        throw .badValue(
          flag, value, "disguised, off, or MIME patterns such as audio/*,application/pdf")
      }
      return .strict(allowedTypes: patterns)
    }
  }

  private static func collisionPolicy(
    _ flag: String, _ value: String
  ) throws(UsageError) -> CollisionPolicy {
    switch value.lowercased() {
    case "rename": return .rename
    case "replace": return .replace
    case "fail": return .fail
    default: throw .badValue(flag, value, "one of rename, replace or fail")
    }
  }
}

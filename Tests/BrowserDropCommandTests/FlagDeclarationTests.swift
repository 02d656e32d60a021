import BrowserDrop
import BrowserDropTestSupport
import Foundation
import Testing

@testable import browserdrop

/// The flags are declared once (`CommandFlags`): the parser, `--help` and the messages of a
/// mistake derive from the declarations, and parsing does no I/O.
@Suite("Flag declarations")
struct FlagDeclarationTests {
  @Test("Each flag is declared once, and --help shows each declaration at the help's column")
  func helpDerivesFromTheDeclarations() {
    let names = CommandFlags.all.flatMap(\.names)
    #expect(Set(names).count == names.count, "\(names)")
    var rest = Substring(HelpText.help)
    for section in HelpSection.allCases {
      let flags = CommandFlags.all.filter { $0.section == section }
      #expect(!flags.isEmpty, "\(section) lists no flag")
      let block = "\n\(section.rawValue):\n" + flags.map(HelpText.entry(for:)).joined() + "\n"
      // The sections in their order, each holding exactly its flags in the declared order.
      guard let found = rest.range(of: block) else {
        Issue.record("--help lacks the \(section.rawValue) section as declared")
        continue
      }
      // The blank line after a section is the one before the next.
      rest = rest[rest.index(before: found.upperBound)...]
    }
    for flag in CommandFlags.all {
      let entry = HelpText.entry(for: flag)
      let lines = entry.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
      #expect(lines.first?.hasPrefix("  " + flag.helpLabel) == true, "\(entry)")
      // Every line of help starts at the column; a label that reaches it stands alone.
      let help = lines.map { String($0.dropFirst(HelpText.helpColumn)) }
      let alone = flag.helpLabel.count + 4 > HelpText.helpColumn
      #expect(Array(help.dropFirst(alone ? 1 : 0)) == flag.help, "\(entry)")
      for line in lines.dropFirst() {
        #expect(line.prefix(HelpText.helpColumn).allSatisfy { $0 == " " }, "\(entry)")
      }
    }
    #expect(
      HelpText.entry(for: CommandFlags.named("--smb-password-file")!)
        == "  --smb-password-file FILE\n" + String(repeating: " ", count: 26)
        + "Read the SMB password from FILE (see SMB PASSWORDS).\n")
    #expect(
      HelpText.entry(for: CommandFlags.named("-h")!)
        == "  -h, --help              Show this help.\n")
  }

  @Test("A value flag given no value names what it expects, from its declaration")
  func missingValues() {
    for flag in CommandFlags.all {
      guard case .option(_, let expected, _) = flag.kind else { continue }
      for arguments in [[flag.name], [flag.name, "--json"], [flag.name, "-h"]] {
        // -h and --help win over the mistake.
        if arguments.last == "-h" {
          #expect(Self.request(arguments) == .help, "\(arguments)")
          continue
        }
        #expect(
          Self.failure(arguments) == "\(flag.name) needs a value: \(expected).", "\(arguments)")
      }
      // A value may start with a dash when it is not one of the flags.
      #expect(
        Self.failure([flag.name + "=-x", "--frobnicate"]) == "Unknown option '--frobnicate'.")
    }
  }

  @Test("The subprocess tests write every declared value flag in both forms")
  func valueFlagsOfTheTests() {
    #expect(Set(CommandFlags.all.filter(\.takesValue).map(\.name)) == ArgumentTests.valueFlags)
  }

  @Test("A flag without a value refuses one; an unknown flag is suggested from the declarations")
  func flagsWithoutValues() {
    for flag in CommandFlags.all where !flag.takesValue {
      #expect(Self.failure([flag.name + "=1"]) == "\(flag.name) doesn't take a value.")
    }
    for flag in CommandFlags.all where flag.name.count > 5 {
      let typo = String(flag.name.dropLast())
      let message = Self.failure([typo])
      #expect(message?.hasPrefix("Unknown option '\(typo)'. Did you mean '--") == true, "\(typo)")
    }
  }

  @Test("Parsing reads no file and looks at no folder; validation does, and names the flag")
  func parsingDoesNoIO() throws {
    let arguments = [
      "--strings", "/nonexistent/strings.json", "--page", "/nonexistent/page",
      "--to", "/etc/hostname", "--staging", "~/staging", "--smb-password-file", "/nonexistent/pw",
      "--quiet-period", "5",
    ]
    let parsed = try ArgumentParser.parseWithoutValidating(arguments)
    guard case .run(let found) = parsed else {
      Issue.record("not a run")
      return
    }
    #expect(found.stringsFiles == ["/nonexistent/strings.json"])
    #expect(found.pageFolders == ["/nonexistent/page"])
    #expect(found.destinationText == "/etc/hostname")
    #expect(found.stagingPath == "~/staging")
    #expect(found.smbPasswordFile == "/nonexistent/pw")
    #expect(found.quietPeriod == 5)
    do {
      _ = try found.validated(environment: [:])
      Issue.record("validated")
    } catch {
      #expect(error.message.hasPrefix("--strings got '/nonexistent/strings.json'"))
    }
    // Every --strings given is read, as before the split; the last one counts.
    let folder = try TemporaryFolder()
    let good = folder.path("strings.json")
    try Data(#"{"title": "Drop"}"#.utf8).write(to: good)
    for files in [[good.path, "/nonexistent"], ["/nonexistent", good.path]] {
      let message = Self.failure(files.flatMap { ["--strings", $0] }, validating: true)
      #expect(message == "--strings got '/nonexistent': the file can't be read.")
    }
  }

  @Test("The command's page text keys are generated from Page/app.js at build time")
  func generatedKeys() {
    #expect(PageStrings.keys == BundledPageStrings.keys)
    #expect(BundledPageStrings.keys == ArgumentTests.pageStringKeys)
    let lines = PageStrings.helpLines
    #expect(lines.joined(separator: " ") == PageStrings.keys.joined(separator: ", ") + ".")
    #expect(lines.allSatisfy { $0.count <= 62 }, "\(lines)")
  }

  private static func request(_ arguments: [String]) -> ParsedRequest? {
    guard case .request(let request) = try? ArgumentParser.parseWithoutValidating(arguments)
    else { return nil }
    return request
  }

  /// The usage error's message for `arguments`, parsed (and validated), or `nil` when accepted.
  private static func failure(_ arguments: [String], validating: Bool = false) -> String? {
    do {
      let parsed = try ArgumentParser.parseWithoutValidating(arguments)
      if validating, case .run(let found) = parsed {
        _ = try found.validated(environment: [:])
      }
      return nil
    } catch {
      return error.message
    }
  }
}

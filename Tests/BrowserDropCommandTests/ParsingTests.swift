import BrowserDrop
import BrowserDropForwarding
import BrowserDropTestSupport
import Foundation
import Testing

@testable import browserdrop

/// The parser in process, next to the subprocess tests in `ArgumentTests`: every flag of the
/// interface, in both `--flag value` and `--flag=value`, lands in the options and in the server's
/// configuration with the value given; the defaults are the documented ones.
@Suite("Parsing every flag")
struct ParsingTests {
  /// One flag with a value (or none), the arguments it needs beside it, and what it must set.
  struct Case {
    let flag: String
    let value: String?
    var context: [String] = []
    let check: (CommandOptions) -> Void
  }

  /// Parses `arguments` and returns the options, recording an issue when it is not a run.
  private static func options(
    _ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation
  ) -> CommandOptions? {
    do {
      guard
        case .run(let options) = try ArgumentParser.parse(
          arguments, environment: ["BROWSERDROP_SMB_PASSWORD": "unused"])
      else {
        Issue.record("\(arguments) is not a run", sourceLocation: sourceLocation)
        return nil
      }
      return options
    } catch {
      Issue.record("\(arguments): \(error.message)", sourceLocation: sourceLocation)
      return nil
    }
  }

  @Test("Every flag, in both forms, sets its option and the server's configuration")
  func everyFlagInBothForms() throws {
    let folder = try TemporaryFolder()
    let strings = folder.path("strings.json")
    try Data(#"{"dropTitle": "Déposez ici"}"#.utf8).write(to: strings)
    let page = try folder.makeFile("page/index.html", size: 10).deletingLastPathComponent()
    let passwordFile = folder.path("password")
    try Data("secret\n".utf8).write(to: passwordFile)
    let dest = folder.path("dest").path
    let staging = folder.path("staging").path
    func configuration(_ options: CommandOptions) -> BrowserDropServer.Configuration {
      options.serverConfiguration(port: options.port)
    }

    let cases: [Case] = [
      Case(flag: "--to", value: dest) { options in
        guard case .local(let url) = options.destination else {
          Issue.record("--to: \(String(describing: options.destination))")
          return
        }
        #expect(url.path == dest)
      },
      Case(flag: "--to", value: "smb://127.0.0.1:4450/guest/in") { options in
        guard case .smb(let address, let credentials) = options.destination else {
          Issue.record("--to smb: \(String(describing: options.destination))")
          return
        }
        #expect(address == "smb://127.0.0.1:4450/guest/in")
        #expect(credentials == nil)
      },
      Case(flag: "--to", value: "smb://anna@127.0.0.1/share") { options in
        guard case .smb(_, let credentials) = options.destination else {
          Issue.record("--to smb user: \(String(describing: options.destination))")
          return
        }
        #expect(credentials?.username == "anna")
      },
      Case(flag: "--bind", value: "127.0.0.1") { options in
        #expect(configuration(options).bindAddress == "127.0.0.1")
      },
      Case(flag: "--bind", value: "::1") { options in
        #expect(configuration(options).bindAddress == "::1")
      },
      Case(flag: "--port", value: "8123") { options in
        #expect(configuration(options).port == 8123)
      },
      Case(flag: "--staging", value: staging) { options in
        #expect(configuration(options).stagingRoot.path == staging)
      },
      Case(flag: "--allow", value: "PDF,.jpg,Mp3") { options in
        #expect(configuration(options).allowedExtensions == ["pdf", "jpg", "mp3"])
      },
      Case(flag: "--max-file-size", value: "1234") { options in
        #expect(configuration(options).maximumFileSize == 1234)
      },
      Case(flag: "--max-file-size", value: "500K") { options in
        #expect(configuration(options).maximumFileSize == 500 * 1024)
      },
      Case(flag: "--max-file-size", value: "20M") { options in
        #expect(configuration(options).maximumFileSize == 20 << 20)
      },
      Case(flag: "--max-file-size", value: "8G") { options in
        #expect(configuration(options).maximumFileSize == 8 << 30)
      },
      Case(flag: "--max-file-size", value: "1T") { options in
        #expect(configuration(options).maximumFileSize == 1 << 40)
      },
      Case(flag: "--reserve", value: "0") { options in
        #expect(configuration(options).reservedFreeSpace == 0)
      },
      Case(flag: "--reserve", value: "2G") { options in
        #expect(configuration(options).reservedFreeSpace == 2 << 30)
      },
      Case(flag: "--max-connections", value: "8") { options in
        #expect(configuration(options).maximumConnections == 8)
      },
      Case(flag: "--max-concurrent", value: "5") { options in
        #expect(configuration(options).maximumConcurrentUploads == 5)
      },
      Case(flag: "--idle-timeout", value: "12.5") { options in
        #expect(configuration(options).idleTimeout == .milliseconds(12_500))
      },
      Case(flag: "--durability", value: "off") { options in
        #expect(configuration(options).durability == false)
      },
      Case(flag: "--content-check", value: "off") { options in
        #expect(configuration(options).contentPolicy == .off)
      },
      Case(flag: "--content-check", value: "Audio/*,application/pdf") { options in
        #expect(
          configuration(options).contentPolicy
            == .strict(allowedTypes: ["audio/*", "application/pdf"]))
      },
      Case(flag: "--title", value: "Scans") { options in
        #expect(configuration(options).pageSettings.title == "Scans")
      },
      Case(flag: "--language", value: "pt-BR") { options in
        #expect(configuration(options).pageSettings.language == "pt-BR")
      },
      Case(flag: "--accent", value: "#0A84FF") { options in
        #expect(configuration(options).pageSettings.accentColor == "#0A84FF")
      },
      Case(flag: "--strings", value: strings.path) { options in
        #expect(configuration(options).pageSettings.strings == ["dropTitle": "Déposez ici"])
      },
      Case(flag: "--page", value: page.path) { options in
        #expect(
          configuration(options).page
            == .custom(directory: URL(filePath: page.path, directoryHint: .isDirectory)))
      },
      Case(flag: "--on-conflict", value: "replace") { options in
        #expect(options.collisionPolicy == .replace)
      },
      Case(flag: "--on-conflict", value: "FAIL") { options in
        #expect(options.collisionPolicy == .fail)
      },
      Case(flag: "--on-conflict", value: "rename") { options in
        #expect(options.collisionPolicy == .rename)
      },
      Case(flag: "--kiosk", value: nil, context: ["--to", dest]) { options in
        #expect(options.kiosk)
        #expect(options.effectiveBatchFolder == .kioskDefault)
      },
      Case(flag: "--quiet-period", value: "2.5", context: ["--kiosk", "--to", dest]) { options in
        #expect(options.quietPeriod == 2.5)
      },
      Case(flag: "--batch-folder", value: "drop {n} {date} {time}") { options in
        #expect(options.effectiveBatchFolder?.text == "drop {n} {date} {time}")
      },
      Case(
        flag: "--smb-password-file", value: passwordFile.path,
        context: ["--to", "smb://anna@127.0.0.1/share"]
      ) { options in
        #expect(options.smbPasswordFile == passwordFile.path)
      },
      Case(flag: "--json", value: nil) { options in
        #expect(options.outputStyle(standardOutputIsTerminal: true) == .json)
      },
      Case(flag: "--no-qr", value: nil) { options in
        #expect(!options.drawsQRCode)
      },
    ]

    for item in cases {
      let forms =
        item.value.map { [[item.flag, $0], [item.flag + "=" + $0]] } ?? [[item.flag]]
      for form in forms {
        // The flag before and after its context: order doesn't matter.
        for arguments in [form + item.context, item.context + form] {
          guard let options = Self.options(arguments) else { continue }
          item.check(options)
        }
      }
    }
  }

  @Test("The defaults are the documented ones")
  func defaults() throws {
    let options = try #require(Self.options([]))
    let configuration = options.serverConfiguration(port: options.port)
    #expect(options.destination == nil)
    #expect(configuration.port == 80)
    #expect(configuration.bindAddress == nil)
    #expect(configuration.stagingRoot == BrowserDropServer.Configuration.defaultStagingRoot)
    #expect(configuration.allowedExtensions == nil)
    #expect(configuration.maximumFileSize == nil)
    #expect(configuration.reservedFreeSpace == 1 << 30)
    #expect(configuration.maximumConnections == 64)
    #expect(configuration.maximumConcurrentUploads == 3)
    #expect(configuration.idleTimeout == .seconds(30))
    #expect(configuration.durability)
    #expect(configuration.contentPolicy == .rejectDisguised)
    #expect(configuration.page == .bundled)
    #expect(options.collisionPolicy == .rename)
    #expect(!options.kiosk)
    #expect(options.quietPeriod == 60)
    #expect(options.effectiveBatchFolder == nil)
    #expect(options.drawsQRCode)
    #expect(options.outputStyle(standardOutputIsTerminal: true) == .terminal)
    #expect(options.outputStyle(standardOutputIsTerminal: false) == .plain)
  }

  @Test("-h, --help and --version win over everything else")
  func helpAndVersion() throws {
    for arguments in [["-h"], ["--help"], ["--port", "nonsense", "--help"], ["--kiosk", "-h"]] {
      guard case .help = try ArgumentParser.parse(arguments, environment: [:]) else {
        Issue.record("\(arguments) is not help")
        continue
      }
    }
    guard case .version = try ArgumentParser.parse(["--version"], environment: [:]) else {
      Issue.record("--version is not version")
      return
    }
  }

  @Test("The command's page text keys are the bundled page's; a page of one's own takes any")
  func pageStringKeys() throws {
    #expect(PageStrings.keys == ArgumentTests.pageStringKeys)
    let folder = try TemporaryFolder()
    let strings = folder.path("strings.json")
    try Data(#"{"ownKey": "for my page"}"#.utf8).write(to: strings)
    let page = try folder.makeFile("page/index.html", size: 10).deletingLastPathComponent()
    let command = try ArgumentParser.parse(
      ["--strings", strings.path, "--page", page.path], environment: [:])
    guard case .run(let options) = command else {
      Issue.record("not a run")
      return
    }
    #expect(options.pageSettings.strings == ["ownKey": "for my page"])
  }

  @Test("SMB's forbidden characters are allowed in --batch-folder for a local destination")
  func batchFolderLocal() throws {
    let folder = try TemporaryFolder()
    for pattern in ["{date}:{time}", "x*", "drop {n}."] {
      let command = try ArgumentParser.parse(
        ["--batch-folder", pattern, "--to", folder.path("dest").path], environment: [:])
      guard case .run(let options) = command else {
        Issue.record("\(pattern) is not a run")
        continue
      }
      #expect(options.batchFolder?.text == pattern)
    }
    // The default kiosk pattern is fine on SMB.
    #expect(throws: Never.self) { try BatchFolderPattern.kioskDefault.checkForSMB() }
  }

  @Test("An empty BROWSERDROP_SMB_PASSWORD counts as unset; the credential is used instead")
  func emptyPasswordVariable() throws {
    let folder = try TemporaryFolder()
    let credentials = folder.path("credentials")
    try FileManager.default.createDirectory(at: credentials, withIntermediateDirectories: true)
    try Data("from-credential\n".utf8).write(to: credentials.appending(path: "smb-password"))
    let arguments = ["--to", "smb://anna@127.0.0.1/share"]
    let command = try ArgumentParser.parse(
      arguments,
      environment: ["BROWSERDROP_SMB_PASSWORD": "", "CREDENTIALS_DIRECTORY": credentials.path])
    guard case .run(let options) = command, case .smb(_, let found) = options.destination else {
      Issue.record("not an SMB run")
      return
    }
    #expect(found?.username == "anna")
    do {
      _ = try ArgumentParser.parse(arguments, environment: ["BROWSERDROP_SMB_PASSWORD": ""])
      Issue.record("an empty variable and nothing else was accepted")
    } catch {
      #expect(error.message.hasPrefix("--to names the user"), "\(error.message)")
    }
  }

  @Test("A password inside the --to address is refused and never shown")
  func passwordInTheAddress() {
    for address in [
      "smb://anna:hunter2@nas.local/share", "smb://anna:hunter2@nas.local",
      "SMB://anna:hunter2@[::1]:4450/share/a", "ftp://anna:hunter2@host/x",
    ] {
      do {
        _ = try ArgumentParser.parse(["--to", address], environment: [:])
        Issue.record("\(address) was accepted")
      } catch {
        #expect(error.message.hasPrefix("--to got"), "\(error.message)")
        #expect(!error.message.contains("hunter2"), "\(error.message)")
        #expect(error.message.contains("anna:…@"), "\(error.message)")
      }
    }
    #expect(DestinationChoice.hidingPassword("smb://anna@nas/s") == "smb://anna@nas/s")
    #expect(DestinationChoice.hidingPassword("/srv/a:b@c") == "/srv/a:b@c")
    #expect(DestinationChoice.hidingPassword("smb://a:b@c/d@e") == "smb://a:…@c/d@e")
  }
}

import BrowserDropTestSupport
import Foundation
import Testing

/// The command line: every flag accepted in both forms, every mistake refused with exit 2 and a
/// message naming the flag.
@Suite("Arguments")
struct ArgumentTests {
  struct Refusal: CustomTestStringConvertible, Sendable {
    let arguments: [String]
    let named: String
    var testDescription: String { arguments.joined(separator: " ") }
  }

  static let refusals: [Refusal] = [
    .init(arguments: ["--port", "99999"], named: "--port"),
    .init(arguments: ["--port", "eighty"], named: "--port"),
    .init(arguments: ["--port=-1"], named: "--port"),
    .init(arguments: ["--max-file-size", "12X"], named: "--max-file-size"),
    .init(arguments: ["--max-file-size=0"], named: "--max-file-size"),
    .init(arguments: ["--max-file-size", "99999999999T"], named: "--max-file-size"),
    .init(arguments: ["--reserve", "-5"], named: "--reserve"),
    .init(arguments: ["--reserve", "1.5G"], named: "--reserve"),
    .init(arguments: ["--frobnicate"], named: "--frobnicate"),
    .init(arguments: ["-x"], named: "-x"),
    .init(arguments: ["--accent", "red"], named: "--accent"),
    .init(arguments: ["--accent=#12345G"], named: "--accent"),
    .init(arguments: ["--accent", "#FFF"], named: "--accent"),
    .init(arguments: ["--to"], named: "--to"),
    .init(arguments: ["--to", "--json"], named: "--to"),
    .init(arguments: ["--to", "ftp://host/x"], named: "--to"),
    .init(arguments: ["--to", "smb://"], named: "--to"),
    .init(arguments: ["--to", "smb://host"], named: "--to"),
    .init(arguments: ["--to", "smb:nas/share"], named: "smb://"),
    .init(arguments: ["--to", "smb:/nas/share"], named: "smb://"),
    .init(arguments: ["--to", "SMB:nas/share"], named: "smb://"),
    .init(arguments: ["--to", "smb://host:99999/share"], named: "65535"),
    .init(arguments: ["--to", "smb://host:0/share"], named: "65535"),
    .init(arguments: ["--to", "/etc/hostname"], named: "not a folder"),
    .init(arguments: ["--to", "/etc/hostname/inbox"], named: "/etc/hostname is a file"),
    .init(arguments: ["--to", "file:///etc/hostname"], named: "not a folder"),
    .init(arguments: ["--on-conflict", "merge"], named: "--on-conflict"),
    .init(arguments: ["--durability", "sometimes"], named: "--durability"),
    .init(arguments: ["--content-check", "mp3"], named: "--content-check"),
    .init(arguments: ["--content-check", "audio/*,/x"], named: "--content-check"),
    .init(arguments: ["--max-connections", "0"], named: "--max-connections"),
    .init(arguments: ["--max-concurrent", "many"], named: "--max-concurrent"),
    .init(arguments: ["--idle-timeout", "0"], named: "--idle-timeout"),
    .init(arguments: ["--idle-timeout", "soon"], named: "--idle-timeout"),
    .init(arguments: ["--language", "english please"], named: "--language"),
    .init(arguments: ["--strings", "/nonexistent/strings.json"], named: "--strings"),
    .init(arguments: ["--page", "/nonexistent/page"], named: "--page"),
    .init(arguments: ["--bind", "everywhere"], named: "--bind"),
    .init(arguments: ["--allow", "pdf,,jpg"], named: "--allow"),
    .init(arguments: ["--name", "in take"], named: "--name"),
    .init(arguments: ["--name", "-intake"], named: "--name"),
    .init(arguments: ["--metrics", "localhost:9464"], named: "--metrics"),
    .init(arguments: ["--metrics", "70000"], named: "--metrics"),
    .init(arguments: ["--allow", "tar.gz"], named: "--allow"),
    .init(arguments: ["--batch-folder", "{week}"], named: "--batch-folder"),
    .init(arguments: ["--batch-folder", "a/b"], named: "--batch-folder"),
    .init(arguments: ["--quiet-period", "5", "--to", "/nonexistent/x"], named: "--quiet-period"),
    .init(
      arguments: ["--kiosk", "--quiet-period", "-1", "--to", "/nonexistent/x"],
      named: "--quiet-period"),
    .init(arguments: ["--kiosk"], named: "--kiosk"),
    .init(arguments: ["--json=yes"], named: "--json"),
    .init(arguments: ["--no-qr=1"], named: "--no-qr"),
    .init(arguments: ["stray"], named: "stray"),
    .init(arguments: ["--", "stray"], named: "stray"),
    .init(arguments: ["--staging="], named: "--staging"),
    .init(arguments: ["--title="], named: "--title"),
    .init(
      arguments: ["--smb-password-file", "/x", "--to", "/nonexistent/x"],
      named: "--smb-password-file"),
    .init(
      arguments: ["--smb-password-file", "/nonexistent/pw", "--to", "smb://anna@127.0.0.1/s"],
      named: "--smb-password-file"),
    .init(
      arguments: ["--smb-password-file", "/dev/null", "--to", "smb://127.0.0.1/guest"],
      named: "--smb-password-file"),
    .init(arguments: ["--to", "smb://anna:hunter2@127.0.0.1/share"], named: "--to"),
  ]

  /// Flags that take a value, so `--flag value` can be written `--flag=value`.
  static let valueFlags: Set<String> = [
    "--to", "--bind", "--port", "--staging", "--allow", "--max-file-size", "--reserve",
    "--max-connections", "--max-concurrent", "--idle-timeout", "--durability", "--content-check",
    "--title", "--language", "--accent", "--strings", "--page", "--on-conflict", "--quiet-period",
    "--batch-folder", "--smb-password-file", "--name", "--metrics",
  ]

  /// The refusals again with every `--flag value` written `--flag=value` (those that have one).
  static var refusalsWithEquals: [Refusal] {
    refusals.compactMap { refusal in
      var arguments: [String] = []
      var index = 0
      let given = refusal.arguments
      while index < given.count {
        if valueFlags.contains(given[index]), index + 1 < given.count,
          !given[index + 1].hasPrefix("--")
        {
          arguments.append(given[index] + "=" + given[index + 1])
          index += 2
        } else {
          arguments.append(given[index])
          index += 1
        }
      }
      return arguments == given ? nil : Refusal(arguments: arguments, named: refusal.named)
    }
  }

  @Test("A bad flag or value exits 2 naming it", arguments: refusals)
  func refused(_ refusal: Refusal) async throws {
    try await Self.expectRefused(refusal)
  }

  @Test("The same mistakes written --flag=value", arguments: refusalsWithEquals)
  func refusedWithEquals(_ refusal: Refusal) async throws {
    try await Self.expectRefused(refusal)
  }

  private static func expectRefused(_ refusal: Refusal) async throws {
    let result = try await CommandProcess.run(refusal.arguments)
    #expect(result.status == 2)
    // Where a row checks a detail of the message, the flag (always the first) is named too.
    if let flag = refusal.arguments.first?.split(separator: "=").first, flag.hasPrefix("--"),
      !refusal.named.hasPrefix("-")
    {
      #expect(result.error.contains(flag), "\(result.error)")
    }
    #expect(result.error.contains(refusal.named), "\(result.error)")
    #expect(result.error.contains("--help"), "\(result.error)")
    #expect(result.output.isEmpty)
    // A password typed into the address is refused without being repeated.
    #expect(!result.error.contains("hunter2"), "\(result.error)")
  }

  @Test("An SMB user with no password from any source is refused at start, naming the three ways")
  func smbUserWithoutPassword() async throws {
    let folder = try TemporaryFolder()
    let emptyCredentials = folder.path("credentials")
    try FileManager.default.createDirectory(at: emptyCredentials, withIntermediateDirectories: true)
    let environments: [[String: String]] = [
      [:], ["BROWSERDROP_SMB_PASSWORD": ""],
      ["CREDENTIALS_DIRECTORY": emptyCredentials.path],
    ]
    for environment in environments {
      let result = try await CommandProcess.run(
        ["--to", "smb://dropper@127.0.0.1/share", "--port", "0", "--bind", "127.0.0.1"],
        environment: environment)
      #expect(result.status == 2, "\(environment)")
      #expect(result.output.isEmpty)
      for name in [
        "--to", "dropper", "BROWSERDROP_SMB_PASSWORD", "--smb-password-file", "smb-password",
        "CREDENTIALS_DIRECTORY",
      ] {
        #expect(result.error.contains(name), "\(name) missing: \(result.error)")
      }
    }
    // An empty password file is no password either, and the file's flag is named.
    let empty = folder.path("empty-password")
    try Data().write(to: empty)
    let result = try await CommandProcess.run([
      "--to", "smb://dropper@127.0.0.1/share", "--smb-password-file", empty.path,
    ])
    #expect(result.status == 2)
    #expect(result.error.contains("--smb-password-file"), "\(result.error)")
    #expect(result.error.contains("empty"), "\(result.error)")
  }

  @Test("With an SMB destination, --batch-folder refuses what SMB forbids in a name")
  func batchFolderForSMB() async throws {
    let cases: [(pattern: String, named: String)] = [
      ("{date}:{time}", "':'"), ("x*", "'*'"), (#"a\b"#, #"'\'"#), ("why?", "'?'"),
      (#"say "hi""#, #"'"'"#), ("<{n}>", "'<'"), ("a|b", "'|'"), ("drop {n}.", "a dot"),
      ("{date} ", "a space"),
    ]
    for (pattern, named) in cases {
      for arguments in [
        ["--batch-folder", pattern, "--to", "smb://127.0.0.1/guest"],
        ["--to=smb://127.0.0.1/guest", "--batch-folder=\(pattern)", "--kiosk"],
      ] {
        let result = try await CommandProcess.run(arguments)
        #expect(result.status == 2, "\(arguments)")
        #expect(result.error.contains("--batch-folder"), "\(result.error)")
        #expect(result.error.contains(named), "\(named) missing: \(result.error)")
        #expect(result.output.isEmpty)
      }
    }
  }

  @Test("An unknown flag close to a real one gets a suggestion")
  func suggestion() async throws {
    let result = try await CommandProcess.run(["--too", "/tmp"])
    #expect(result.status == 2)
    #expect(result.error.contains("Did you mean '--to'?"), "\(result.error)")
  }

  @Test("--help lists every flag in sections and exits 0")
  func help() async throws {
    for flag in ["--help", "-h"] {
      let result = try await CommandProcess.run([flag, "--port", "nonsense-is-ignored-by-help"])
      #expect(result.status == 0)
      let sections = [
        "OVERVIEW:", "USAGE:", "DESTINATION:", "SERVER:", "LIMITS:", "PAGE:", "KIOSK:", "OUTPUT:",
        "GENERAL:", "ONE-SHOT MODE", "SMB PASSWORDS:", "EXIT STATUS:", "EXAMPLES:",
      ]
      for section in sections {
        #expect(result.output.contains(section), "\(section) missing")
      }
      // Every event type --json writes.
      let events = [
        "listening", "uploadStarted", "uploadFinished", "uploadFailed", "addressesChanged",
        "interrupted", "finishing", "nothingArrived", "batchClosed", "forwardStarted",
        "forwardProgress", "forwarded", "forwardFailed", "retrying", "kept", "stopped", "notice",
      ]
      for event in events {
        #expect(result.output.contains(event), "\(event) missing from --help")
      }
      let flags = [
        "--to", "--bind", "--port", "--staging", "--allow", "--max-file-size", "--reserve",
        "--max-connections", "--max-concurrent", "--idle-timeout", "--title", "--language",
        "--accent", "--strings", "--page", "--on-conflict", "--kiosk", "--quiet-period", "--json",
        "--no-qr", "--help", "--version", "--batch-folder", "--smb-password-file",
        "--durability", "--content-check",
        "BROWSERDROP_SMB_PASSWORD", "CREDENTIALS_DIRECTORY",
      ]
      for name in flags {
        #expect(result.output.contains(name), "\(name) missing from --help")
      }
      // Enough to use the tool without the README: every page text key, each event's fields,
      // what a page of one's own must speak, and the browsers' cap on --max-concurrent.
      for key in Self.pageStringKeys {
        #expect(result.output.contains(key + ",") || result.output.contains(key + "."), "\(key)")
      }
      let fields = [
        "listening         addresses: [{url, kind, interface}]",
        "uploadStarted     path, size", "uploadFinished    path, size, mimeType (or null), kind",
        "uploadFailed      path, reason", "addressesChanged  addresses",
        "batchClosed       batch, files, bytes, handedOver", "forwardStarted    destination",
        "forwardProgress   files, totalFiles, bytes, totalBytes",
        "forwarded         destination, files, bytes,", "renamed: [{from, to}]",
        "forwardFailed     message, staging", "retrying          seconds",
        "kept              staging, files, bytes", "stopped           message, staging",
        "notice            message",
        "protocol v1", "GET /config.json", "POST /upload?path=", "most 6 connections per host",
      ]
      for text in fields {
        #expect(result.output.contains(text), "\(text) missing from --help")
      }
    }
  }

  /// The keys of `DEFAULT_STRINGS` in the bundled page's script, read from Page/app.js.
  static var pageStringKeys: [String] {
    let script = URL(filePath: #filePath).deletingLastPathComponent()
      .appending(path: "../../Page/app.js").standardizedFileURL
    guard let text = try? String(contentsOf: script, encoding: .utf8),
      let start = text.range(of: "const DEFAULT_STRINGS = {"),
      let end = text[start.upperBound...].range(of: "};")
    else {
      Issue.record("DEFAULT_STRINGS not found in \(script.path)")
      return []
    }
    return text[start.upperBound..<end.lowerBound].split(separator: "\n").compactMap { line in
      line.firstMatch(of: /^\s*([A-Za-z]+):/).map { String($0.1) }
    }
  }

  @Test("The bundled page has 27 text keys; an unknown one in --strings is refused by name")
  func stringsKeys() async throws {
    #expect(Self.pageStringKeys.count == 27, "\(Self.pageStringKeys)")
    let folder = try TemporaryFolder()
    let strings = folder.path("strings.json")
    try Data(#"{"dropTitle": "Drop scans here", "dropTitel": "typo"}"#.utf8).write(to: strings)
    let result = try await CommandProcess.run(["--strings", strings.path])
    #expect(result.status == 2)
    #expect(result.error.contains("--strings"), "\(result.error)")
    #expect(result.error.contains("'dropTitel'"), "\(result.error)")
    #expect(result.output.isEmpty)
  }

  @Test("--help, -h and --version win over other mistakes, as in swift-argument-parser")
  func helpWins() async throws {
    let cases: [(arguments: [String], version: Bool)] = [
      (["--help", "--frobnicate"], false), (["--frobnicate", "--help"], false),
      (["--port", "--help"], false), (["--to", "-h"], false), (["stray", "-h"], false),
      (["--json=yes", "--help"], false), (["--kiosk", "--help"], false),
      (["--version", "--frobnicate"], true), (["--port", "--version"], true),
      (["--max-file-size", "12X", "--version"], true),
    ]
    for (arguments, version) in cases {
      let result = try await CommandProcess.run(arguments)
      #expect(result.status == 0, "\(arguments): \(result.error)")
      #expect(result.error.isEmpty, "\(arguments): \(result.error)")
      #expect(
        version ? result.output.hasPrefix("browserdrop ") : result.output.contains("USAGE:"),
        "\(arguments)")
    }
    // After "--" nothing is an option: a stray --help there is refused like any argument.
    let after = try await CommandProcess.run(["--", "--help"])
    #expect(after.status == 2)
  }

  @Test("--version prints the version and exits 0")
  func version() async throws {
    let result = try await CommandProcess.run(["--version"])
    #expect(result.status == 0)
    #expect(result.output.hasPrefix("browserdrop "))
  }

  @Test(
    "Every server, page and destination flag reaches the server, in either form",
    arguments: [false, true])
  func flagsReachTheServer(equals: Bool) async throws {
    let folder = try TemporaryFolder()
    let strings = folder.path("strings.json")
    try Data(#"{"dropTitle": "Déposez ici"}"#.utf8).write(to: strings)
    let page = folder.path("page")
    try FileManager.default.createDirectory(at: page, withIntermediateDirectories: true)
    try Data("<!doctype html><title>our own intake page</title>\n".utf8).write(
      to: page.appending(path: "index.html"))
    // Replaced at the destination (--on-conflict replace), in the batch's folder (--batch-folder).
    let old = try folder.makeFile("dest/drop 1/scan.pdf", size: 10, seed: 9)
    let staging = folder.path("staging")
    let pairs: [(String, String)] = [
      ("--port", "0"), ("--bind", "127.0.0.1"), ("--staging", staging.path),
      ("--allow", "PDF,.jpg"), ("--max-file-size", "20M"), ("--reserve", "0"),
      ("--max-connections", "8"), ("--max-concurrent", "5"), ("--idle-timeout", "2"),
      ("--title", "Scans"), ("--language", "fr"), ("--accent", "#0A84FF"),
      ("--strings", strings.path), ("--page", page.path), ("--on-conflict", "replace"),
      ("--batch-folder", "drop {n}"), ("--to", folder.path("dest").path),
      ("--durability", "off"), ("--content-check", "off"),
    ]
    let arguments =
      ["--json", "--no-qr"] + pairs.flatMap { equals ? ["\($0)=\($1)"] : [$0, $1] }
    let command = try CommandProcess(arguments)
    defer { Task { await command.stop() } }
    let port = try await command.listeningPort()
    let listening = try await command.waitForEvent("listening")
    #expect(
      listening["addresses"] as? [[String: String]] == [
        ["url": "http://127.0.0.1:\(port)/", "kind": "other", "interface": "lo"]
      ])
    #expect(
      FileManager.default.fileExists(atPath: staging.appending(path: ".browserdrop.lock").path))
    let config = try await HTTP.getJSON("http://127.0.0.1:\(port)/config.json")
    #expect(config["title"] as? String == "Scans")
    #expect(config["language"] as? String == "fr")
    #expect(config["accentColor"] as? String == "#0A84FF")
    #expect(config["allowedExtensions"] as? [String] == ["jpg", "pdf"])
    #expect((config["maximumFileSize"] as? NSNumber)?.intValue == 20 * 1024 * 1024)
    #expect((config["maximumConcurrentUploads"] as? NSNumber)?.intValue == 5)
    #expect((config["strings"] as? [String: String])?["dropTitle"] == "Déposez ici")
    let index = try await HTTP.get("http://127.0.0.1:\(port)/")
    #expect(index.contains("our own intake page"), "\(index)")
    // --idle-timeout 2: a connection that sends nothing is closed long before the default 30 s.
    let silent = try await HTTP.secondsUntilClosed(port: port)
    #expect(silent < 15, "a silent connection stayed open \(silent) s")

    let file = try folder.makeFile("scan.pdf", size: 1000)
    #expect(try await Uploader.upload(file, as: "scan.pdf", port: port) == 201)
    #expect(try await Uploader.upload(file, as: "scan.txt", port: port) == 400)
    let big = try folder.makeFile("big.jpg", size: 20 * 1024 * 1024 + 1)
    #expect(try await Uploader.upload(big, as: "big.jpg", port: port) == 413)
    command.send(SIGINT)
    #expect(try await command.waitForExit() == 0)
    #expect(TemporaryFolder.files(in: folder.path("dest")) == ["drop 1/scan.pdf"])
    #expect(try Data(contentsOf: old) == Data(contentsOf: file))
    #expect((command.events.last?["renamed"] as? [Any])?.isEmpty == true)
  }

  @Test("--content-check and --durability reach the server")
  func contentCheckAndDurability() async throws {
    let folder = try TemporaryFolder()
    let strict = try CommandProcess([
      "--json", "--port=0", "--bind", "127.0.0.1", "--staging", folder.path("a").path,
      "--content-check", "application/pdf,image/*", "--durability=off",
    ])
    defer { Task { await strict.stop() } }
    let port = try await strict.listeningPort()
    let text = folder.path("notes.txt")
    try Data("plain words, not a PDF\n".utf8).write(to: text)
    #expect(try await Uploader.upload(text, as: "notes.txt", port: port) == 400)
    let elf = URL(filePath: "/bin/true")
    let relaxed = try CommandProcess([
      "--json", "--port=0", "--bind", "127.0.0.1", "--staging", folder.path("b").path,
      "--content-check=off",
    ])
    defer { Task { await relaxed.stop() } }
    let relaxedPort = try await relaxed.listeningPort()
    // With checking off, even an executable named as a song is taken as it is.
    #expect(try await Uploader.upload(elf, as: "song.mp3", port: relaxedPort) == 201)
  }

  @Test("Start-up failures name the flag and the value: --bind, --staging")
  func startFailuresNameTheFlag() async throws {
    let folder = try TemporaryFolder()
    // 192.0.2.1 (TEST-NET-1) is no address of this machine: bind() fails, nothing is sent.
    for extra in [[], ["--kiosk", "--to", folder.path("dest").path]] {
      let bind = try await CommandProcess.run(
        ["--bind", "192.0.2.1", "--port", "0", "--staging", folder.path("a").path] + extra)
      #expect(bind.status == 1)
      #expect(bind.error.contains("--bind") && bind.error.contains("192.0.2.1"), "\(bind.error)")
      #expect(!bind.error.contains("port 0"), "\(bind.error)")
    }
    let json = try await CommandProcess.run([
      "--json", "--bind", "192.0.2.1", "--port", "0", "--staging", folder.path("a").path,
    ])
    #expect(json.status == 1)
    #expect(json.output.contains(#""event":"stopped""#) && json.output.contains("--bind"))
    let file = try folder.makeFile("a-file", size: 1)
    for (staging, detail) in [("/proc/x", "/proc/x"), (file.path + "/x", file.path)] {
      for extra in [[], ["--kiosk", "--to", folder.path("dest").path]] {
        let result = try await CommandProcess.run(
          ["--bind", "127.0.0.1", "--port", "0", "--staging", staging] + extra)
        #expect(result.status == 1)
        for text in ["--staging", staging, detail, "can't be created"] {
          #expect(result.error.contains(text), "\(text) missing: \(result.error)")
        }
        #expect(!result.error.contains("doesn’t exist"), "\(result.error)")
      }
    }
  }

  @Test("A taken port is a runtime failure (exit 1) with a sentence, not a usage error")
  func portTaken() async throws {
    let folder = try TemporaryFolder()
    let first = try CommandProcess([
      "--json", "--port", "0", "--bind", "127.0.0.1", "--staging", folder.path("a").path,
    ])
    defer { Task { await first.stop() } }
    let port = try await first.listeningPort()
    let second = try await CommandProcess.run([
      "--port", "\(port)", "--bind", "127.0.0.1", "--staging", folder.path("b").path,
    ])
    #expect(second.status == 1)
    #expect(second.error.contains("\(port)"), "\(second.error)")
  }
}

/// Small HTTP helpers over curl.
enum HTTP {
  static func get(_ url: String) async throws -> String {
    let data = try await ChildProcess.run(
      "/usr/bin/curl", ["-sS", "--max-time", "10", url], error: .inherit, timeout: .seconds(30)
    ).output
    return String(decoding: data, as: UTF8.self)
  }

  /// Opens a connection to 127.0.0.1:`port`, sends nothing, and returns how many seconds the
  /// server took to close it (at most about 30, when the test gives up).
  static func secondsUntilClosed(port: Int) async throws -> Double {
    let start = ContinuousClock.now
    // bash's /dev/tcp: `cat` reads until the server closes the connection.
    _ = try await ChildProcess.run(
      "/bin/bash", ["-c", "exec 3<>/dev/tcp/127.0.0.1/\(port) && cat <&3 >/dev/null"],
      error: .inherit, timeout: .seconds(30))
    let elapsed = ContinuousClock.now - start
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
  }

  static func getJSON(_ url: String) async throws -> [String: Any] {
    let data = try await ChildProcess.run(
      "/usr/bin/curl", ["-sS", "--max-time", "10", url], error: .inherit, timeout: .seconds(30)
    ).output
    guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
      throw HarnessError(description: "not a JSON object: \(String(decoding: data, as: UTF8.self))")
    }
    return object
  }
}

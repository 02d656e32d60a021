import BrowserDropTestSupport
import Foundation
import Testing

@testable import browserdrop

/// `Examples/Kiosk`: the systemd unit is hardened as its README says, passes
/// `systemd-analyze verify`, and its command line starts a kiosk that SIGTERM stops cleanly.
/// (`Examples/EmbeddedHost` is a target of the package: every build compiles it.)
@Suite("Examples")
struct ExampleTests {
  static let unit = URL(filePath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appending(path: "Examples/Kiosk/browserdrop-kiosk.service")

  /// The unit's settings in order, continuation lines joined, comments left out.
  static func settings(_ text: String) -> [(key: String, value: String)] {
    var result: [(key: String, value: String)] = []
    var pending = ""
    for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
      let line = raw.trimmingCharacters(in: .whitespaces)
      if pending.isEmpty, line.hasPrefix("#") || line.hasPrefix(";") || line.hasPrefix("[") {
        continue
      }
      if line.hasSuffix("\\") {
        pending += line.dropLast() + " "
        continue
      }
      let whole = pending + line
      pending = ""
      guard let equals = whole.firstIndex(of: "=") else { continue }
      result.append((String(whole[..<equals]), String(whole[whole.index(after: equals)...])))
    }
    return result
  }

  /// ExecStart split into words, `${STATE_DIRECTORY}` replaced by `stateDirectory`.
  static func command(stateDirectory: String) throws -> [String] {
    let text = try String(contentsOf: unit, encoding: .utf8)
    let execStart = try #require(settings(text).first { $0.key == "ExecStart" }?.value)
    return execStart.split(separator: " ").map {
      $0.replacingOccurrences(of: "${STATE_DIRECTORY}", with: stateDirectory)
    }
  }

  @Test("The kiosk unit has the hardening its README promises, and no password")
  func hardening() throws {
    let text = try String(contentsOf: Self.unit, encoding: .utf8)
    let settings = Self.settings(text)
    func values(_ key: String) -> [String] {
      settings.filter { $0.key == key }.map(\.value)
    }
    #expect(values("LoadCredential") == ["smb-password:/etc/browserdrop/smb-password"])
    #expect(values("DynamicUser") == ["yes"])
    #expect(values("ProtectSystem") == ["strict"])
    #expect(values("PrivateTmp") == ["yes"])
    #expect(values("NoNewPrivileges") == ["yes"])
    #expect(values("AmbientCapabilities") == ["CAP_NET_BIND_SERVICE"])
    #expect(values("CapabilityBoundingSet") == ["CAP_NET_BIND_SERVICE"])
    #expect(values("Restart") == ["on-failure"])
    #expect(values("StateDirectory") == ["browserdrop"])
    let command = try Self.command(stateDirectory: "/var/lib/browserdrop")
    #expect(command.first == "/usr/local/bin/browserdrop")
    #expect(command.contains("--kiosk"))
    let to = try #require(command.firstIndex(of: "--to"))
    let address = command[to + 1]
    #expect(address.hasPrefix("smb://") && address.contains("@"))
    #expect(DestinationChoice.hidingPassword(address) == address, "\(address)")
    #expect(
      command[command.index(after: try #require(command.firstIndex(of: "--staging")))]
        == "/var/lib/browserdrop")
    // The password never goes in the unit; its one Environment= line turns Swift's backtracer off.
    #expect(values("Environment") == ["SWIFT_BACKTRACE=enable=no"])
    #expect(values("EnvironmentFile").isEmpty)
    #expect(!text.contains("BROWSERDROP_SMB_PASSWORD"))
  }

  @Test("systemd-analyze verify accepts the unit (ExecStart pointed at the built binary)")
  func systemdVerify() async throws {
    let folder = try TemporaryFolder()
    let text = try String(contentsOf: Self.unit, encoding: .utf8)
    #expect(text.contains("ExecStart=/usr/local/bin/browserdrop "))
    let copy = folder.path("browserdrop-kiosk.service")
    try Data(
      text.replacingOccurrences(
        of: "ExecStart=/usr/local/bin/browserdrop ",
        with: "ExecStart=\(CommandProcess.binary.path) "
      ).utf8
    ).write(to: copy)
    // Warnings (an unknown key, a bad value) go to standard error with exit status 0: both
    // streams must stay empty.
    let (termination, output) = try await ChildProcess.run(
      "/bin/sh", ["-c", "exec /usr/bin/systemd-analyze verify \"$1\" 2>&1", "sh", copy.path],
      timeout: .seconds(60))
    let said = String(decoding: output, as: UTF8.self)
    #expect(termination == .exited(0), "\(said)")
    #expect(said.isEmpty, "\(said)")
  }

  @Test("The unit's command line runs a kiosk that takes the credential and stops on SIGTERM")
  func unitCommandLine() async throws {
    let folder = try TemporaryFolder()
    let state = folder.path("state")
    try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
    let credentials = folder.path("credentials")
    try FileManager.default.createDirectory(at: credentials, withIntermediateDirectories: true)
    try Data("the-password\n".utf8).write(to: credentials.appending(path: "smb-password"))
    let command = try Self.command(stateDirectory: state.path)
    // As systemd would start it, but on a free port of 127.0.0.1 and with JSON lines to read.
    let kiosk = try CommandProcess(
      Array(command.dropFirst()) + ["--json", "--port", "0", "--bind", "127.0.0.1"],
      environment: ["CREDENTIALS_DIRECTORY": credentials.path])
    defer { Task { await kiosk.stop() } }
    _ = try await kiosk.listeningPort()
    #expect(FileManager.default.fileExists(atPath: state.appending(path: "outbox/journal").path))
    kiosk.send(SIGTERM)
    #expect(try await kiosk.waitForExit() == 0)
    #expect(kiosk.events.last?.event == "stopped")
    #expect(
      !kiosk.errorText.contains("the-password")
        && !kiosk.outputLines.joined().contains("the-password"))
  }
}

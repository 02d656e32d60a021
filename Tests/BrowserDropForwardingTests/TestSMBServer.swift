import BrowserDropTestSupport
import Foundation

@testable import BrowserDropForwarding

/// The smbd that scripts/test.sh starts on 127.0.0.1 (scripts/smbd.sh), found through
/// `BROWSERDROP_TEST_SMB_PORT` and `BROWSERDROP_TEST_SMB_BASE` (`LoopbackSMB`), or one of a
/// test's own.
struct TestSMBServer {
  let port: Int
  let base: URL

  /// The server from the environment; fails the test (never skips it) when absent.
  static func fromEnvironment() throws -> TestSMBServer {
    let (port, base) = try LoopbackSMB.shared()
    return TestSMBServer(port: port, base: base)
  }

  /// A second smbd of the test's own in `scratch` (so stopping it cannot disturb the other
  /// tests), started with scripts/smbd.sh; `LoopbackSMB.run("down"|"up", base:port:)` stops
  /// and starts it again. The shared server must be there too (the harness checks it).
  static func own(in scratch: Scratch) async throws -> TestSMBServer {
    _ = try fromEnvironment()
    let base = scratch.root.appendingPathComponent("smbd")
    let port = try FreePort.closed()
    try await LoopbackSMB.run("up", base: base, port: port)
    return TestSMBServer(port: port, base: base)
  }

  /// The share's folder on this machine's disk.
  func directory(_ share: String) -> URL {
    base.appendingPathComponent("shares/\(share)")
  }

  /// `smb://127.0.0.1:port/share/folder`.
  func destination(
    _ share: String, _ folder: String, credentials: Credentials? = nil,
    options: SMBOptions = SMBOptions(timeout: .seconds(10))
  ) throws -> SMBDestination {
    try SMBDestination(
      "smb://127.0.0.1:\(port)/\(share)/\(folder)", credentials: credentials, options: options)
  }
}

/// A folder name no other test uses.
func uniqueName(_ prefix: String) -> String {
  "\(prefix)-\(UUID().uuidString.prefix(8))"
}

/// Makes `url` and everything in it owned by `nobody` (the guest account), as if a guest wrote it.
func giveToGuest(_ url: URL) throws {
  let paths =
    [url.path]
    + (FileManager.default.subpaths(atPath: url.path) ?? []).map {
      url.path + "/" + $0
    }
  for path in paths {
    try FileManager.default.setAttributes(
      [.ownerAccountName: "nobody", .posixPermissions: 0o777], ofItemAtPath: path)
  }
}

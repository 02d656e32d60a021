package import Foundation

/// The loopback smbd of the SMB tests (scripts/smbd.sh): the shared one that scripts/test.sh
/// starts, and private ones that a test starts and stops itself.
package enum LoopbackSMB {
  /// The shared server is not running.
  package struct Missing: Error, CustomStringConvertible {
    /// How to start it.
    package var description: String {
      "BROWSERDROP_TEST_SMB_PORT and BROWSERDROP_TEST_SMB_BASE are not set: these tests need "
        + "the loopback smbd. Run scripts/test.sh, or start one with "
        + "`BASE=/tmp/bd-smbd PORT=4445 scripts/smbd.sh up` and export both variables."
    }
  }

  /// The shared server, from `BROWSERDROP_TEST_SMB_PORT` and `BROWSERDROP_TEST_SMB_BASE`;
  /// throws `Missing` (the test fails, never skips) when they are not set.
  package static func shared() throws -> (port: Int, base: URL) {
    let environment = ProcessInfo.processInfo.environment
    guard let port = environment["BROWSERDROP_TEST_SMB_PORT"].flatMap({ Int($0) }),
      let base = environment["BROWSERDROP_TEST_SMB_BASE"]
    else { throw Missing() }
    return (port, URL(filePath: base))
  }

  /// Runs `scripts/smbd.sh up|down` for a test's own smbd on `port`, serving from `base`;
  /// throws when the script fails.
  ///
  /// Through `ChildProcess`, reaped on a thread of its own: Foundation's `Process` did not reap
  /// the script once it had started smbd in the background.
  package static func run(_ command: String, base: URL, port: Int) async throws {
    let script = URL(filePath: #filePath)
      .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
      .deletingLastPathComponent().appending(path: "scripts/smbd.sh").path
    var environment = ProcessInfo.processInfo.environment
    environment["BASE"] = base.path
    environment["PORT"] = String(port)
    // smbd keeps the script's standard streams: no pipe of ours, so nothing waits for it.
    let (termination, _) = try await ChildProcess.run(
      "/bin/bash", [script, command], environment: environment, output: .inherit,
      error: .inherit, timeout: .seconds(120))
    guard termination == .exited(0) else {
      throw HarnessError(description: "scripts/smbd.sh \(command) failed; see \(base.path)/log")
    }
  }
}

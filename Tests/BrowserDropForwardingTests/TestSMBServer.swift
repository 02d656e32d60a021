import Foundation
import Glibc
import Testing

@testable import BrowserDropForwarding

/// The smbd that scripts/test.sh starts on 127.0.0.1 (scripts/smbd.sh), found through
/// `BROWSERDROP_TEST_SMB_PORT` and `BROWSERDROP_TEST_SMB_BASE`.
struct TestSMBServer {
  struct Missing: Error, CustomStringConvertible {
    var description: String {
      "BROWSERDROP_TEST_SMB_PORT and BROWSERDROP_TEST_SMB_BASE are not set: the SMB tests need "
        + "the loopback smbd. Run scripts/test.sh, or start one with "
        + "`BASE=/tmp/bd-smbd PORT=4445 scripts/smbd.sh up` and export both variables."
    }
  }

  let port: Int
  let base: URL

  /// The server from the environment; fails the test (never skips it) when absent.
  static func fromEnvironment() throws -> TestSMBServer {
    let environment = ProcessInfo.processInfo.environment
    guard let portText = environment["BROWSERDROP_TEST_SMB_PORT"], let port = Int(portText),
      let base = environment["BROWSERDROP_TEST_SMB_BASE"]
    else { throw Missing() }
    return TestSMBServer(port: port, base: URL(fileURLWithPath: base))
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

/// A TCP port on 127.0.0.1 that nothing listens on (bound, then released). It is chosen below
/// the kernel's ephemeral range (32768–60999 here): a port from that range, once released, can
/// be handed at once to another test's listener on port 0 or to a client socket, and a test
/// expecting "refused" then met a silent listener of a parallel test. Bounded attempts.
func unusedPort() throws -> Int {
  var lastError: (any Error)?
  for _ in 0..<50 {
    do {
      return try LoopbackSocket(port: Int.random(in: 10_000..<20_000)).port
    } catch {
      lastError = error
    }
  }
  throw lastError!
}

/// A listening socket on 127.0.0.1 that never accepts or answers: the kernel completes the TCP
/// handshake into the backlog and then nothing is ever said.
final class LoopbackSocket {
  let fd: Int32
  let port: Int

  init(listening: Bool = false, port requested: Int = 0) throws {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
    self.fd = fd
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = in_port_t(UInt16(requested).bigEndian)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
      }
    }
    guard bound, !listening || listen(fd, 16) == 0 else {
      close(fd)
      throw POSIXError(.EADDRNOTAVAIL)
    }
    port = Int(UInt16(bigEndian: address.sin_port))
  }

  deinit { close(fd) }
}

/// Runs scripts/smbd.sh for a second, private smbd instance (used to stop one mid-transfer).
///
/// Spawned and reaped by hand: Foundation's `Process` on Linux did not reap the script here once
/// it had started smbd in the background, so `terminationHandler` never ran.
func smbdHarness(_ command: String, base: URL, port: Int) async throws {
  let script = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("scripts/smbd.sh").path
  let arguments = ["/bin/bash", script, command]
  var environment = ProcessInfo.processInfo.environment
  environment["BASE"] = base.path
  environment["PORT"] = String(port)
  let environmentList = environment.map { "\($0.key)=\($0.value)" }
  let status: Int32 = try await withCheckedThrowingContinuation { continuation in
    let thread = Thread {
      var pid = pid_t()
      let argv = arguments.map { strdup($0) } + [nil]
      let envp = environmentList.map { strdup($0) } + [nil]
      defer { (argv + envp).forEach { free($0) } }
      let spawned = posix_spawn(&pid, "/bin/bash", nil, nil, argv, envp)
      guard spawned == 0 else {
        continuation.resume(throwing: POSIXError(POSIXErrorCode(rawValue: spawned) ?? .EIO))
        return
      }
      var status: Int32 = 0
      while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
      continuation.resume(returning: status)
    }
    thread.start()
  }
  #expect(status == 0, "scripts/smbd.sh \(command) failed; see \(base.path)/log")
}

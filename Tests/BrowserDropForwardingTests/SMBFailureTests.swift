import BrowserDropTestSupport
import Foundation
import Glibc
import Testing

@testable import BrowserDropForwarding

/// Every failure has its exact sentence, and a later delivery finishes the job exactly once.
struct SMBFailureTests {
  private static let files: [String: Data] = [
    "a.txt": Data("a".utf8), "sub/b.bin": bytes(200_000, seed: 9), "c.txt": Data("c".utf8),
  ]

  /// Delivers `files` to a fresh guest folder after `fault`, and checks it arrived exactly once.
  private func resume(_ source: URL, on server: TestSMBServer, resumed: Int = 0) async throws {
    let folder = uniqueName("resume")
    let report = try await Forwarder().forward(
      folder: source, to: server.destination("guest", folder))
    let arrived = server.directory("guest").appendingPathComponent(folder)
    #expect(try contents(of: arrived) == ["sub": Data?.none].merging(Self.files) { $1 })
    #expect(report.resumedFiles == resumed)
    #expect(!FileManager.default.fileExists(atPath: source.path))
  }

  private func expectFailure(
    _ source: URL, to destination: SMBDestination, _ kind: ForwardFailure.Kind, _ sentence: String
  ) async {
    let failure = await #expect(throws: ForwardFailure.self) {
      try await Forwarder().forward(folder: source, to: destination)
    }
    #expect(failure?.kind == kind)
    #expect(failure?.description == sentence)
    #expect(FileManager.default.fileExists(atPath: source.path))
  }

  @Test func wrongPassword() async throws {
    let server = try TestSMBServer.fromEnvironment()
    let scratch = try Scratch()
    defer { scratch.remove() }
    let source = try scratch.folder("drop", Self.files)
    let folder = uniqueName("auth")
    await expectFailure(
      source,
      to: try server.destination(
        "private", folder, credentials: Credentials(username: "dropper", password: "wrong")),
      .wrongCredentials, "127.0.0.1 rejected the user name or password. Check them and try again.")
    // The same wrong password must not fall back to guest access on a guest share either.
    await expectFailure(
      source,
      to: try server.destination(
        "guest", folder, credentials: Credentials(username: "dropper", password: "wrong")),
      .wrongCredentials, "127.0.0.1 rejected the user name or password. Check them and try again.")
    let destination = try server.destination(
      "private", folder, credentials: Credentials(username: "dropper", password: "s3cret"))
    _ = try await Forwarder().forward(folder: source, to: destination)
    let arrived = server.directory("private").appendingPathComponent(folder)
    #expect(try contents(of: arrived) == ["sub": Data?.none].merging(Self.files) { $1 })
  }

  @Test func guestDeniedOnThePasswordShare() async throws {
    let server = try TestSMBServer.fromEnvironment()
    let scratch = try Scratch()
    defer { scratch.remove() }
    let source = try scratch.folder("drop", Self.files)
    await expectFailure(
      source, to: try server.destination("private", uniqueName("denied")), .permissionDenied,
      "127.0.0.1 didn't let guests into the share “private”. Sign in as a user who has access to it."
    )
    try await resume(source, on: server)
  }

  @Test func unknownShare() async throws {
    let server = try TestSMBServer.fromEnvironment()
    let scratch = try Scratch()
    defer { scratch.remove() }
    let source = try scratch.folder("drop", Self.files)
    await expectFailure(
      source, to: try server.destination("nope", "x"), .shareNotFound,
      "127.0.0.1 has no share named “nope”. Check the share name in the address.")
    try await resume(source, on: server)
  }

  @Test func nothingListening() async throws {
    let server = try TestSMBServer.fromEnvironment()
    let scratch = try Scratch()
    defer { scratch.remove() }
    let source = try scratch.folder("drop", Self.files)
    let destination = try SMBDestination("smb://127.0.0.1:\(try FreePort.closed())/guest/x")
    await expectFailure(
      source, to: destination, .connectionRefused,
      "Couldn't reach 127.0.0.1 — the connection was refused. "
        + "Check the address and port, and that file sharing is turned on.")
    try await resume(source, on: server)
  }

  @Test func listenerThatNeverAnswers() async throws {
    let server = try TestSMBServer.fromEnvironment()
    let scratch = try Scratch()
    defer { scratch.remove() }
    let source = try scratch.folder("drop", Self.files)
    let silent = try FreePort.silentListener()
    defer { close(silent.descriptor) }
    let destination = try SMBDestination(
      "smb://127.0.0.1:\(silent.port)/guest/x", options: SMBOptions(timeout: .seconds(1)))
    // That the configured 1 s reaches libsmbclient (and not its 20 s default) is
    // SMBLibraryTests.aContextHoldsTheConfiguredTimeout: no wall-clock bound here, which a
    // loaded machine can break.
    await expectFailure(
      source, to: destination, .timedOut,
      "Couldn't reach 127.0.0.1 — the connection timed out. "
        + "Check that the server is on and reachable from this network.")
    try await resume(source, on: server)
  }

  @Test func readOnlyShare() async throws {
    let server = try TestSMBServer.fromEnvironment()
    let scratch = try Scratch()
    defer { scratch.remove() }
    let source = try scratch.folder("drop", Self.files)
    await expectFailure(
      source, to: try server.destination("ro", uniqueName("ro")), .readOnly,
      "The share “ro” on 127.0.0.1 is read-only for this user. "
        + "Choose another destination or ask for write access.")
    #expect(
      try FileManager.default.contentsOfDirectory(atPath: server.directory("ro").path).isEmpty)
    try await resume(source, on: server)
  }

  /// Every test that writes to the `tiny` share (a 20 MiB tmpfs) belongs here (except
  /// `SMBSplitTests`' one, which takes the same lock). The suite is serialized, and each test
  /// also holds ``withTinyShare(_:_:)``'s lock, so neither another test of this process nor
  /// another test process using the same smbd can take its space.
  @Suite(.serialized)
  struct TinyShare {
    @Test func fullShareThenResumeAfterFreeingSpace() async throws {
      let server = try TestSMBServer.fromEnvironment()
      try await Self.withTinyShare(server) { tiny in
        let scratch = try Scratch()
        defer { scratch.remove() }
        // Everything this test writes is in its own folder, removed at the end.
        let folder = uniqueName("full")
        let own = tiny.appendingPathComponent(folder)
        // Writable for smbd's guest user, like the share's root.
        try FileManager.default.createDirectory(
          at: own, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o777])
        defer { try? FileManager.default.removeItem(at: own) }
        // Leave about 5 MiB free, whatever earlier runs left behind.
        let filler = own.appendingPathComponent("filler")
        try Data(count: max(0, try Self.freeBytes(tiny) - (5 << 20))).write(to: filler)
        let files = [
          "a.bin": bytes(1 << 20, seed: 11), "b.bin": bytes(8 << 20, seed: 12),
          "c.bin": bytes(1 << 20, seed: 13),
        ]
        let source = try scratch.folder("drop", files)
        let destination = try server.destination("tiny", folder + "/drop")
        let arrived = own.appendingPathComponent("drop")
        let failure = await #expect(throws: ForwardFailure.self) {
          try await Forwarder().forward(folder: source, to: destination)
        }
        #expect(failure?.kind == .destinationFull)
        #expect(
          failure?.description == "The share “tiny” on 127.0.0.1 is full — “b.bin” didn't fit. "
            + "Free up space there, then forward again.")
        #expect(FileManager.default.fileExists(atPath: source.path))
        #expect(try contents(of: arrived) == ["a.bin": files["a.bin"]])

        try FileManager.default.removeItem(at: filler)
        // The rest must fit now; wait (bounded) in case smbd still holds the partial b.bin.
        let needed = files["b.bin"]!.count + files["c.bin"]!.count + (1 << 20)
        let deadline = ContinuousClock.now + .seconds(10)
        while try Self.freeBytes(tiny) < needed, ContinuousClock.now < deadline {
          try await Task.sleep(for: .milliseconds(50))
        }
        do {
          let report = try await Forwarder().forward(folder: source, to: destination)
          #expect(try contents(of: arrived) == files)
          #expect(report.resumedFiles == 1)
        } catch {
          let listing = FileManager.default.enumerator(atPath: tiny.path)?.allObjects ?? []
          Issue.record(
            "resume failed: \(error); \(try Self.freeBytes(tiny)) bytes free; in tiny: \(listing)")
        }
      }
    }

    /// Free bytes on the file system holding `folder`.
    static func freeBytes(_ folder: URL) throws -> Int {
      var space = statvfs()
      guard statvfs(folder.path, &space) == 0 else { throw POSIXError(.EIO) }
      return Int(space.f_bavail) * Int(space.f_frsize)
    }

    /// Runs `body` with the `tiny` share's folder while holding an exclusive flock(2) on
    /// `$BROWSERDROP_TEST_SMB_BASE/tiny.lock`, so test processes sharing one smbd take turns.
    static func withTinyShare(
      _ server: TestSMBServer, _ body: (URL) async throws -> Void
    ) async throws {
      let fd = open(server.base.appendingPathComponent("tiny.lock").path, O_RDWR | O_CREAT, 0o644)
      guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
      defer { close(fd) }
      let deadline = ContinuousClock.now + .seconds(300)
      while flock(fd, LOCK_EX | LOCK_NB) != 0 {
        guard errno == EWOULDBLOCK || errno == EINTR, ContinuousClock.now < deadline else {
          throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
        try await Task.sleep(for: .milliseconds(50))
      }
      try await body(server.directory("tiny"))
    }
  }

  @Test func smbdStoppedMidTransferThenResumed() async throws {
    try await stopSMBDMidTransferThenResume(largeFile: 48 << 20)
  }
}

/// Delivers a, b (`largeFile` bytes) and c to an smbd of the test's own, stops that smbd while
/// b is on the wire, checks the sentence, starts it again and checks that a resume delivers
/// everything exactly once.
func stopSMBDMidTransferThenResume(largeFile: Int) async throws {
  let scratch = try Scratch()
  defer { scratch.remove() }
  let own = try await TestSMBServer.own(in: scratch)
  let (base, port) = (own.base, own.port)
  let files = [
    "a.bin": bytes(1 << 20, seed: 21), "b.bin": bytes(largeFile, seed: 22),
    "c.bin": bytes(1 << 20, seed: 23),
  ]
  let source = try scratch.folder("drop", files)
  let destination = try own.destination("guest", "mid")
  let stopped = Stopped()
  let failure = await #expect(throws: ForwardFailure.self) {
    try await Forwarder().forward(folder: source, to: destination) { progress in
      // Once part of b.bin is on the wire, stop the server before the next chunk is sent.
      guard progress.currentFile == "b.bin", progress.completedBytes > 1 << 20,
        await stopped.claim()
      else { return }
      do {
        try await LoopbackSMB.run("down", base: base, port: port)
      } catch {
        Issue.record(error)
      }
    }
  }
  #expect(failure?.kind == .connectionLost)
  #expect(
    failure?.description == "Lost the connection to 127.0.0.1 while sending “b.bin”. "
      + "Forward again to finish; files that arrived won't be sent twice.")

  try await LoopbackSMB.run("up", base: base, port: port)
  let report = try await Forwarder().forward(folder: source, to: destination)
  try await LoopbackSMB.run("down", base: base, port: port)
  #expect(try contents(of: own.directory("guest").appendingPathComponent("mid")) == files)
  #expect(report.resumedFiles == 1)
}

/// Lets exactly one caller through.
actor Stopped {
  private var done = false

  func claim() -> Bool {
    defer { done = true }
    return !done
  }
}

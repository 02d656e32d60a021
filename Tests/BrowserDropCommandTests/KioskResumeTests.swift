import BrowserDropTestSupport
import Foundation
import Glibc
import Testing

/// A kiosk keeps what a cut-off upload sent in its staging root: `kill -9` during the upload,
/// a restart on the same staging, and the sender resumes where the disk says and the batch is
/// forwarded once.
@Suite("Kiosk: resuming across a crash")
struct KioskResumeTests {
  static let id = "0123456789abcdef0123456789abcdef"

  static func head(port: Int, method: String, extra: String, length: Int) -> String {
    "\(method) /upload?path=Films/big.bin&upload=\(id) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n"
      + "Origin: http://127.0.0.1:\(port)\r\n\(extra)Content-Length: \(length)\r\n\r\n"
  }

  @Test("kill -9 during an upload, restart on the same staging: the upload resumes, forwarded once")
  func killDuringUploadThenResume() async throws {
    let folder = try TemporaryFolder()
    let size = 24 << 20
    let source = try folder.makeFile("src/big.bin", size: size, seed: 9)
    let body = [UInt8](try Data(contentsOf: source))
    let command = try KioskTests.start(folder, quietPeriod: "0.5")
    defer { Task { await command.stop() } }
    let port = try await command.listeningPort()

    // Ten MiB of the body arrive, the connection stays open, and the kiosk is killed.
    let sent = 10 << 20
    let client = try await RawClient.connect(port: port)
    try await client.send(Self.head(port: port, method: "POST", extra: "", length: size))
    try await client.send(body[..<sent])
    let partial = folder.path("staging/.browserdrop-resumable/\(Self.id).partial").path
    try await CrashTrialTests.waitUntil("the partial to hold what was sent", timeout: 20) {
      ((try? FileManager.default.attributesOfItem(atPath: partial)[.size]) as? Int ?? 0) >= sent
    }
    try await CrashTrialTests.sigkill(command)
    client.socket.close()
    #expect(!command.events.contains { $0.event == "forwarded" })

    let restarted = try KioskTests.start(folder, quietPeriod: "0.5")
    defer { Task { await restarted.stop() } }
    let newPort = try await restarted.listeningPort()
    let probe = try await RawClient.connect(port: newPort)
    try await probe.send(
      "HEAD /upload?path=Films/big.bin&upload=\(Self.id) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    let standing = try await probe.readReply()
    #expect(standing.status == 204)
    // Same boot: every byte the kernel had is durable after the restart's flush.
    #expect(standing.headers["upload-offset"] == String(sent))
    #expect(standing.headers["upload-length"] == String(size))

    let patch = try await RawClient.connect(port: newPort)
    try await patch.send(
      Self.head(
        port: newPort, method: "PATCH", extra: "Upload-Offset: \(sent)\r\n", length: size - sent))
    try await patch.send(body[sent...])
    let reply = try await patch.readReply()
    #expect(reply.status == 201, "\(reply.status)")
    let forwarded = try await restarted.waitForEvent("forwarded")
    #expect(forwarded.int("files") == 1)
    let resumed = try #require(restarted.events.first { $0.event == "uploadResumed" })
    #expect(resumed.int("offset") == sent && resumed.int("size") == size)
    restarted.send(SIGTERM)
    #expect(try await restarted.waitForExit() == 0)

    let delivered = TemporaryFolder.files(in: folder.path("dest"))
    #expect(delivered.count == 1 && delivered.first?.hasSuffix("/Films/big.bin") == true)
    if let name = delivered.first {
      #expect(try Data(contentsOf: folder.path("dest/" + name)) == Data(body), "not byte-identical")
    }
    #expect(restarted.events.filter { $0.event == "forwarded" }.count == 1)
    // Nothing of the upload's bytes is left in the staging root; only its record, without a
    // partial file (which says "stored"), kept until it expires.
    #expect(Self.storeEntries(folder) == ["\(Self.id).record"])
  }

  /// The steps of storing a resumable upload where `BROWSERDROP_TEST_CRASH_POINT` has the
  /// kiosk kill itself (`ResumeCrashPoint` in the library).
  static let crashPoints = ["resume-received", "resume-stored"]

  /// The kiosk dies (SIGKILL, by itself) at each step of storing an upload whose every byte has
  /// arrived, so its client never gets the 201. After a restart on the same staging the upload
  /// is stored exactly once: a crash before the rename leaves it paused one byte short (the
  /// client sends that byte and the file is stored), a crash after it leaves the file in the
  /// crashed session's folder, made a batch at start, and HEAD says complete, so the client
  /// sends nothing; a POST or PATCH of the id stores nothing a second time.
  @Test(
    "killed at each step of storing: after a restart the file is stored and forwarded once",
    arguments: crashPoints)
  func killedWhileStoring(point: String) async throws {
    let folder = try TemporaryFolder()
    let size = 3 << 20
    let source = try folder.makeFile("src/big.bin", size: size, seed: 4)
    let body = [UInt8](try Data(contentsOf: source))
    let crashing = try CommandProcess(
      Self.kioskArguments(folder), environment: ["BROWSERDROP_TEST_CRASH_POINT": point])
    defer { Task { await crashing.stop() } }
    let port = try await crashing.listeningPort()
    let client = try await RawClient.connect(port: port)
    try await client.send(Self.head(port: port, method: "POST", extra: "", length: size))
    try? await client.send(body)
    _ = try await crashing.waitForExit(timeout: 30)
    #expect(crashing.terminationSignal == SIGKILL, "\(point): the kiosk did not die there")
    #expect(try await client.closedSilently(), "\(point): an answer was sent")
    let stored = point == "resume-stored"

    let restarted = try KioskTests.start(folder, quietPeriod: "0.5")
    defer { Task { await restarted.stop() } }
    let newPort = try await restarted.listeningPort()
    let standing = try await Self.exchange(port: newPort, Self.headRequest)
    #expect(standing.status == 204, "\(point): \(standing.status)")
    #expect(standing.headers["upload-length"] == String(size))
    if stored {
      // The file is in a batch already: complete, and nothing is taken again.
      #expect(standing.headers["upload-offset"] == String(size))
      let waiting = "Expect: 100-continue\r\n"
      let patch = try await Self.exchange(
        port: newPort,
        Self.head(
          port: newPort, method: "PATCH", extra: waiting + "Upload-Offset: 0\r\n", length: size))
      #expect(patch.status == 409 && patch.errorCode == "offset_mismatch", "\(patch.text)")
      #expect(patch.headers["upload-offset"] == String(size))
      let post = try await Self.exchange(
        port: newPort, Self.head(port: newPort, method: "POST", extra: waiting, length: size))
      #expect(post.status == 409 && post.errorCode == "offset_mismatch", "\(post.text)")
    } else {
      // Never renamed into place: paused one byte short of the end, never "complete".
      #expect(standing.headers["upload-offset"] == String(size - 1), "\(point)")
      let patch = try await Self.exchange(
        port: newPort,
        Self.head(
          port: newPort, method: "PATCH", extra: "Upload-Offset: \(size - 1)\r\n", length: 1),
        body: body[(size - 1)...])
      #expect(patch.status == 201, "\(point): \(patch.text)")
    }
    let forwarded = try await restarted.waitForEvent("forwarded", timeout: 60)
    #expect(forwarded.int("files") == 1)
    // Stored: HEAD says so from the next session too (the record outlives the batch).
    let after = try await Self.exchange(port: newPort, Self.headRequest)
    #expect(after.status == 204 && after.headers["upload-offset"] == String(size), "\(point)")
    #expect(restarted.events.filter { $0.event == "uploadStarted" }.count == (stored ? 0 : 1))
    restarted.send(SIGTERM)
    #expect(try await restarted.waitForExit() == 0)
    #expect(restarted.events.filter { $0.event == "forwarded" }.count == 1)

    let delivered = TemporaryFolder.files(in: folder.path("dest"))
    #expect(
      delivered.count == 1 && delivered.first?.hasSuffix("/Films/big.bin") == true,
      "\(point): \(delivered)")
    if let name = delivered.first {
      #expect(try Data(contentsOf: folder.path("dest/" + name)) == Data(body), "not byte-identical")
    }
    #expect(Self.storeEntries(folder) == ["\(Self.id).record"], "\(point)")
  }

  static func kioskArguments(_ folder: TemporaryFolder) -> [String] {
    [
      "--kiosk", "--json", "--port", "0", "--bind", "127.0.0.1", "--quiet-period", "0.5",
      "--staging", folder.path("staging").path, "--to", folder.path("dest").path,
      "--batch-folder", "batch {n}",
    ]
  }

  static let headRequest =
    "HEAD /upload?path=Films/big.bin&upload=\(id) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"

  /// One request on a connection of its own, and its reply. Between two batches the kiosk
  /// listens again within moments: a refused connection is tried again, for at most 10 s.
  static func exchange(
    port: Int, _ head: String, body: some Collection<UInt8> = [UInt8]()
  ) async throws -> HTTPReply {
    let deadline = Date().addingTimeInterval(10)
    var client: RawClient?
    while client == nil {
      do {
        client = try await RawClient.connect(port: port)
      } catch {
        if Date() > deadline { throw error }
        try await Task.sleep(for: .milliseconds(20))
      }
    }
    guard let client else { throw HarnessError(description: "no connection") }
    try await client.send(head)
    if !body.isEmpty { try await client.send(body) }
    return try await client.readReply()
  }

  /// The names in the staging root's resumable store.
  static func storeEntries(_ folder: TemporaryFolder) -> [String] {
    let path = folder.path("staging/.browserdrop-resumable").path
    // `.lock` is the store's lock file, which stays (`ResumableStore.lock()`).
    return ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [])
      .filter { $0 != ".lock" }.sorted()
  }
}

import BrowserDropTestSupport
import Foundation
import Testing

/// The kiosk's next session can't start when a batch closes: the closing batch is still reported
/// and forwarded, the failure is said after that batch's line (the next session's lines always
/// come after it), and the kiosk keeps trying until a session starts.
///
/// The fault: the resumable store's lock file, which every session of a kiosk opens for writing
/// to lock it, is made immutable (`chattr +i`) once the first session holds it, so the next
/// session's open fails with `EPERM`, even for root. The staging root and the outbox stay
/// writable, so only the start fails.
@Suite("Kiosk: the next session can't start")
struct KioskStartFailureTests {
  /// Sets or clears the immutable attribute of `path`.
  private static func immutable(_ on: Bool, _ path: String) async throws {
    let (termination, _) = try await ChildProcess.run(
      "/usr/bin/chattr", [on ? "+i" : "-i", path], output: .null)
    guard termination.status == 0 else {
      throw HarnessError(description: "chattr \(on ? "+i" : "-i") \(path) failed")
    }
  }

  @Test func theFailureIsSaidAfterTheClosingBatchAndALaterStartServesTheNextBatch() async throws {
    let folder = try TemporaryFolder()
    let command = try KioskTests.start(folder, quietPeriod: "2")
    defer { Task { await command.stop() } }
    let port = try await command.listeningPort()
    let lock = folder.path("staging/.browserdrop-resumable/.lock").path
    #expect(FileManager.default.fileExists(atPath: lock), "the first session holds the lock")

    // Made immutable before the upload, so that no load on the machine can let the batch close
    // (and the next session open the file) first; the first session's open is unaffected.
    try await Self.immutable(true, lock)
    do {
      let a = try folder.makeFile("a.bin", size: 40_000, seed: 1)
      #expect(try await Uploader.upload(a, as: "a.bin", port: port) == 201)
      try await Self.expectTheFailureAfterTheClosingBatch(command)
    } catch {
      // The temporary folder can't be removed while the file is immutable.
      try? await Self.immutable(false, lock)
      Issue.record("events so far: \(command.outputLines)")
      throw error
    }
    // Once the lock file can be opened again, a later try starts a session on the same port.
    try await Self.immutable(false, lock)
    let count = command.events.count
    let b = try folder.makeFile("b.bin", size: 30_000, seed: 2)
    var status: Int?
    let deadline = ContinuousClock.now + .seconds(30)
    while status != 201 && ContinuousClock.now < deadline {
      // Refused (no session serves the port) until the next try, every 2 s.
      status = try? await Uploader.upload(b, as: "b.bin", port: port)
      if status != 201 { try await Task.sleep(for: .milliseconds(200)) }
    }
    #expect(status == 201, "a session served the port again within 30 s")
    try await command.waitForEvent("forwarded", after: count)
    command.send(SIGTERM)
    #expect(try await command.waitForExit() == 0)
    #expect(
      TemporaryFolder.files(in: folder.path("dest")).sorted() == ["batch 1/a.bin", "batch 2/b.bin"])
    #expect(try Data(contentsOf: folder.path("dest/batch 2/b.bin")) == Data(contentsOf: b))
  }

  /// The batch closes with its one file, then the next session's start fails, said in a
  /// notice that names the resumable store, and the batch is forwarded all the same.
  private static func expectTheFailureAfterTheClosingBatch(_ command: CommandProcess) async throws {
    let isStartFailure = { (event: JSONObject) in
      event.event == "notice"
        && (event.string("message") ?? "").hasPrefix("Can't start the next session yet")
    }
    let closed = try await command.waitForEvent("batchClosed")
    let failure = try await command.waitForEvent("notice", where: isStartFailure)
    let events = command.events
    let closedAt = try #require(events.firstIndex { $0.event == "batchClosed" })
    let failedAt = try #require(events.firstIndex(where: isStartFailure))
    #expect(closedAt < failedAt, "the closing batch's line comes first")
    #expect(closed.int("files") == 1)
    let message = failure.string("message") ?? ""
    #expect(message.contains(".browserdrop-resumable"), "names the store: \(message)")
    // The closed batch is forwarded whatever the next session does.
    try await command.waitForEvent("forwarded")
  }
}

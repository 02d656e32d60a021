import BrowserDropTestSupport
import Foundation
import Synchronization
import Testing

@testable import BrowserDrop

/// A resume sent with `Expect: 100-continue` (curl and many app libraries send it for large
/// bodies; browsers never do) whose connection goes before the `100 Continue` could be written:
/// the upload stays paused where it stood, with its bytes, like any other cut. Before, the
/// failed `100 Continue` ended the upload: `HEAD` answered `unknown_upload` and the client
/// started again from 0, while the kept bytes stayed on the disk, counted by nobody.
@Suite("A resume cut before its 100 Continue")
struct ResumeContinueTests {
  @Test func theUploadStaysPausedWithItsBytesAndResumesLater() async throws {
    let session = try await ResumeTests.start()
    defer { Task { await session.stop() } }
    let pauses = PauseLog(session.server.pauses)
    let body = TestBytes.make(300_000, seed: 5)
    let client = ResumeClient(port: session.port, path: "a.bin", id: ResumeClient.randomID())
    try await ResumeTests.cutPost(client, body, after: 100_000, pauses: pauses)

    // The head asks for 100 Continue, and the connection is reset at once: the server reads
    // the head (the kernel keeps what arrived before the reset) and its 100 Continue fails.
    let head = client.patchHead(offset: 100_000, length: 200_000)
    let expecting = head.replacingOccurrences(
      of: "\r\n\r\n", with: "\r\nExpect: 100-continue\r\n\r\n")
    let cut = try await RawClient.connect(port: session.port)
    try await cut.send(expecting)
    cut.reset()
    try await pauses.waitForResumed(1)
    try await pauses.waitForPaused(2)
    #expect(try await client.offset() == 100_000, "still paused where it stood")

    let reply = try await client.exchange(
      client.patchHead(offset: 100_000, length: 200_000), body[100_000...])
    #expect(reply.status == 201)
    #expect(session.stagedFiles()["a.bin"] == body)
    let events = try await session.log.wait {
      $0.contains { if case .uploadFinished = $0 { true } else { false } }
    }
    let failed = events.filter { if case .uploadFailed = $0 { true } else { false } }
    #expect(failed.isEmpty, "\(failed)")
  }
}

/// With durability on, a resumable upload is complete for `HEAD` only once its name is on the
/// disk: a client told "complete" forgets the upload, so a power cut between that answer and
/// the folder's flush would lose the file for good. A `HEAD` that arrives while the flush runs
/// waits for it (as for any request still holding the upload), then says complete.
@Suite("A resumable upload is complete once its name is flushed")
struct ResumeCompleteWhenDurableTests {
  @Test func headDuringTheFoldersFlushWaitsForIt() async throws {
    let root = FileManager.default.temporaryDirectory.appending(
      path: "bd-resume-flush-\(UUID().uuidString)")
    let gate = GroupCommitTests.Gate()
    let flushing = Atomic(false)
    FolderSync.replaceOperationsForTesting(
      under: root.path,
      with: FolderSync.Operations(
        syncData: { _, _ in nil },
        syncFolder: { _ in
          flushing.store(true, ordering: .releasing)
          gate.wait()
          return nil
        }))
    defer {
      gate.release()
      FolderSync.removeOperationsForTesting(under: root.path)
    }
    let session = try await ResumeTests.start(root: root) { $0.durability = true }
    defer { Task { await session.stop() } }
    let body = TestBytes.make(50_000, seed: 6)
    let client = ResumeClient(port: session.port, path: "a.bin", id: ResumeClient.randomID())
    let post = Task { try await client.exchange(client.postHead(length: body.count), body[...]) }
    let deadline = ContinuousClock.now + .seconds(10)
    while !flushing.load(ordering: .acquiring) {
      try #require(ContinuousClock.now < deadline, "the folder's flush never started")
      try await Task.sleep(for: .milliseconds(10))
    }
    // The file has its name; the name is not on the disk yet.
    let answered = Atomic(false)
    let head = Task {
      let reply = try await client.head()
      answered.store(true, ordering: .releasing)
      return reply
    }
    try await Task.sleep(for: .milliseconds(500))
    let early = answered.load(ordering: .acquiring)
    #expect(!early, "HEAD answered before the name was flushed")
    gate.release()
    let reply = try await head.value
    #expect(reply.status == 204 && reply.headers["upload-offset"] == "50000")
    #expect(try await post.value.status == 201)
  }
}

import BrowserDropTestSupport
import Foundation
import Glibc
import Testing

@testable import BrowserDrop

/// `finishHandingOverListener` and `start(on:)`: the listening socket goes from one session to
/// the next, so no connection that arrives or waits in between is refused or cut.
@Suite("Listener handover: one session's socket served by the next")
struct ListenerHandoverTests {
  @Test func aConnectionArrivingBetweenFinishAndStartIsServedByTheNextSession() async throws {
    let first = try await TestSession.start()
    defer { try? FileManager.default.removeItem(at: first.root) }
    #expect(try await first.upload("a.txt", [1]).status == 201)
    let finished = try await first.server.finishHandingOverListener()
    let folder = try #require(finished.folder)
    defer { try? FileManager.default.removeItem(at: folder) }
    let handover = try #require(finished.handover)
    #expect(handover.port == first.port)

    // No session serves the port now: the kernel queues the connection and its request.
    let client = try await first.client()
    try await client.send(Requests.uploadHead(port: first.port, encodedPath: "b.txt", length: 3))
    try await client.send([7, 8, 9])

    let next = try await TestSession.start(on: handover)
    defer { Task { await next.stop() } }
    #expect(next.port == first.port)
    #expect(try await client.readReply().status == 201)
    #expect(next.stagedFiles() == ["b.txt": [7, 8, 9]])
    #expect(
      try FileManager.default.subpathsOfDirectory(atPath: folder.path).sorted() == ["a.txt"])
    // Taken once: another session can't take it again.
    let third = BrowserDropServer(configuration: next.server.configuration)
    await #expect(throws: BrowserDropError.self) { try await third.start(on: handover) }
  }

  @Test func aConnectionAcceptedButNotAnsweredIsHandedOverWithWhatItSent() async throws {
    let first = try await TestSession.start()
    defer { try? FileManager.default.removeItem(at: first.root) }
    #expect(try await first.upload("a.txt", [1]).status == 201)
    let body = TestBytes.make(5000)
    let head = Requests.uploadHead(port: first.port, encodedPath: "late.bin", length: body.count)
    let client = try await first.client()
    let split = head.utf8.count / 2
    try await client.send(Array(head.utf8.prefix(split)))
    // Connected after it: once this is answered, the session has accepted the first one too
    // (the listener accepts in the order the kernel queued them).
    #expect(try await first.get("/config.json").status == 200)

    let finished = try await first.server.finishHandingOverListener()
    let handover = try #require(finished.handover)
    #expect(handover.waitingCount == 1)
    if let folder = finished.folder { try? FileManager.default.removeItem(at: folder) }

    try await client.send(Array(head.utf8.dropFirst(split)))
    try await client.send(body)
    let next = try await TestSession.start(on: handover)
    defer { Task { await next.stop() } }
    #expect(try await client.readReply().status == 201)
    #expect(next.stagedFiles() == ["late.bin": body])
    #expect(await next.server.receivedFiles.map(\.relativePath) == ["late.bin"])
  }

  @Test func anUploadAdmittedBeforeTheFinishEndsThereAndALaterOneIsHandedOver() async throws {
    let first = try await TestSession.start()
    defer { try? FileManager.default.removeItem(at: first.root) }
    let early = TestBytes.make(20_000, seed: 2)
    let earlyClient = try await first.client()
    try await earlyClient.send(
      Requests.uploadHead(port: first.port, encodedPath: "early.bin", length: early.count))
    try await earlyClient.send(early.prefix(1000))
    try await first.log.wait { $0.contains { if case .uploadStarted = $0 { true } else { false } } }

    let finishing = Task { try await first.server.finishHandingOverListener(grace: .seconds(60)) }
    // It waits for the admitted upload; bounded, since no event says it has begun to.
    let began = ContinuousClock.now
    while await !first.server.isFinishing {
      try #require(ContinuousClock.now - began < .seconds(20))
      try await Task.sleep(for: .milliseconds(5))
    }
    // Admitted by nobody while the first session finishes: handed over to the next.
    let late = TestBytes.make(3000, seed: 3)
    let lateClient = try await first.client()
    try await lateClient.send(
      Requests.uploadHead(port: first.port, encodedPath: "late.bin", length: late.count))
    try await lateClient.send(late)
    // The admitted one is served to its end by the first session.
    try await earlyClient.send(early.dropFirst(1000))
    #expect(try await earlyClient.readReply().status == 201)

    let finished = try await finishing.value
    let folder = try #require(finished.folder)
    defer { try? FileManager.default.removeItem(at: folder) }
    #expect(try FileManager.default.subpathsOfDirectory(atPath: folder.path) == ["early.bin"])
    let handover = try #require(finished.handover)
    let next = try await TestSession.start(on: handover)
    defer { Task { await next.stop() } }
    #expect(try await lateClient.readReply().status == 201)
    #expect(next.stagedFiles() == ["late.bin": late])
    // The first session's events: the admitted upload finished there, and nothing failed.
    let events = try await first.log.wait {
      $0.contains { if case .uploadFinished = $0 { true } else { false } }
    }
    #expect(!events.contains { if case .uploadFailed = $0 { true } else { false } })
    #expect(
      !events.contains {
        if case .uploadStarted(let upload) = $0 { upload.relativePath == "late.bin" } else { false }
      })
  }

  @Test func aFailedStartLeavesTheHandoverForTheNextTry() async throws {
    let first = try await TestSession.start()
    defer { try? FileManager.default.removeItem(at: first.root) }
    let handover = try #require(try await first.server.finishHandingOverListener().handover)
    // A staging root that is a file: the start fails before it takes the socket.
    let blocker = FileManager.default.temporaryDirectory.appending(
      path: "bd-test-\(UUID().uuidString)")
    try Data().write(to: blocker)
    defer { try? FileManager.default.removeItem(at: blocker) }
    var configuration = first.server.configuration
    configuration.stagingRoot = blocker.appending(path: "staging")
    await #expect(throws: BrowserDropError.self) {
      try await BrowserDropServer(configuration: configuration).start(on: handover)
    }
    let next = try await TestSession.start(on: handover)
    defer { Task { await next.stop() } }
    #expect(next.port == first.port)
    #expect(try await next.upload("x.txt", [5]).status == 201)
  }

  @Test func aHandoverDroppedUnusedClosesTheSocket() async throws {
    let first = try await TestSession.start()
    defer { try? FileManager.default.removeItem(at: first.root) }
    var handover = try await first.server.finishHandingOverListener().handover
    #expect(handover != nil)
    handover = nil
    await #expect(throws: (any Error).self) { _ = try await first.client() }
  }

  @Test func aSuspendedSessionHandsNothingOver() async throws {
    let first = try await TestSession.startOutsideEphemeralPorts()
    defer { try? FileManager.default.removeItem(at: first.root) }
    #expect(try await first.upload("a.txt", [1]).status == 201)
    await first.server.suspend()
    let finished = try await first.server.finishHandingOverListener()
    #expect(finished.handover == nil)
    let folder = try #require(finished.folder)
    try? FileManager.default.removeItem(at: folder)
    await #expect(throws: BrowserDropError.sessionEnded) {
      try await first.server.finishHandingOverListener()
    }
  }
}

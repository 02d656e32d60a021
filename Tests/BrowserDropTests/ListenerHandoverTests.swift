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
    // Replayed from what it had sent: the first half of the head, read by the first session.
    #expect(handover.waitingBytes == split)
    if let folder = finished.folder { try? FileManager.default.removeItem(at: folder) }

    try await client.send(Array(head.utf8.dropFirst(split)))
    try await client.send(body)
    #expect(handover.connectionsTakenOver == nil)
    let next = try await TestSession.start(on: handover)
    defer { Task { await next.stop() } }
    // The parked one; nothing waited in the kernel's queue.
    #expect(handover.connectionsTakenOver == 1)
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

    // Connected before the finish, and accepted (answered after it, the page request shows
    // the session accepted it), but its request comes after: the session parks it.
    let lateClient = try await first.client()
    #expect(try await first.get("/config.json").status == 200)

    let finishing = Task { try await first.server.finishHandingOverListener(grace: .seconds(60)) }
    try await Self.waitUntil { await first.server.isFinishing }
    // Admitted by nobody while the first session finishes: handed over to the next.
    let late = TestBytes.make(3000, seed: 3)
    let lateHead = Requests.uploadHead(
      port: first.port, encodedPath: "late.bin", length: late.count)
    try await lateClient.send(lateHead)
    try await lateClient.send(late)
    // Parked with its whole head (answered `.handOver`) before the admitted upload ends.
    try await Self.waitUntil { await first.server.parkedConnections == 1 }
    // The admitted one is served to its end by the first session.
    try await earlyClient.send(early.dropFirst(1000))
    #expect(try await earlyClient.readReply().status == 201)

    let finished = try await finishing.value
    let folder = try #require(finished.folder)
    defer { try? FileManager.default.removeItem(at: folder) }
    #expect(try FileManager.default.subpathsOfDirectory(atPath: folder.path) == ["early.bin"])
    let handover = try #require(finished.handover)
    // Parked with its whole head, so through `.handOver` (a head cut short parks unfinished),
    // and with as much of the body as had come.
    #expect(handover.waitingCount == 1)
    #expect(
      (lateHead.utf8.count...lateHead.utf8.count + late.count).contains(handover.waitingBytes))
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

  @Test func theNextSessionCountsExactlyTheConnectionsQueuedDuringTheSwitch() async throws {
    let first = try await TestSession.start()
    defer { try? FileManager.default.removeItem(at: first.root) }
    #expect(try await first.upload("a.txt", [1]).status == 201)
    let finished = try await first.server.finishHandingOverListener()
    if let folder = finished.folder { try? FileManager.default.removeItem(at: folder) }
    let handover = try #require(finished.handover)
    #expect(handover.waitingCount == 0)

    // Three uploads sent while no session serves the port: the kernel queues them.
    var clients: [RawClient] = []
    for index in 0..<3 {
      let client = try await first.client()
      try await client.send(
        Requests.uploadHead(port: first.port, encodedPath: "q\(index).txt", length: 1))
      try await client.send([UInt8(index)])
      clients.append(client)
    }
    // `connect` returns once the client's side of the handshake is done; the kernel may finish
    // the server's (and queue the connection) a moment later, on another core.
    try await Self.waitUntil { handover.queuedConnections == 3 }
    let next = try await TestSession.start(on: handover)
    defer { Task { await next.stop() } }
    #expect(handover.connectionsTakenOver == 3)
    for client in clients { #expect(try await client.readReply().status == 201) }
    #expect(next.stagedFiles() == ["q0.txt": [0], "q1.txt": [1], "q2.txt": [2]])

    // A switch with nothing waiting hands over none.
    let again = try #require(try await next.server.finishHandingOverListener().handover)
    let third = try await TestSession.start(on: again)
    defer { Task { await third.stop() } }
    #expect(again.connectionsTakenOver == 0)
    #expect(try await third.upload("b.txt", [2]).status == 201)
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
    // Outside the ephemeral range: no client's own port can take it once closed.
    let first = try await TestSession.startOutsideEphemeralPorts()
    defer { try? FileManager.default.removeItem(at: first.root) }
    var handover = try await first.server.finishHandingOverListener().handover
    #expect(handover != nil)
    handover = nil
    // A process another suite starts at this moment holds a copy of every descriptor from its
    // fork to its exec (where close-on-exec closes it), and the kernel still queues a connection
    // meanwhile: a connection taken is tried again, for a few seconds, before the socket is
    // called open. (Once seen in a full parallel run, never alone.)
    var refused = false
    let deadline = ContinuousClock.now + .seconds(10)
    while !refused && ContinuousClock.now < deadline {
      do {
        _ = try await first.client()
      } catch {
        refused = true
        break
      }
      try await Task.sleep(for: .milliseconds(20))
    }
    #expect(refused, "the port still took connections 10 s after the handover was dropped")
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

  @Test func connectionsArrivingDuringTheGraceWaitInTheQueueNotParkedPastTheLimit() async throws {
    let limit = 4
    let first = try await TestSession.start { $0.maximumConnections = limit }
    defer { try? FileManager.default.removeItem(at: first.root) }
    // An upload in flight holds the grace open.
    let early = TestBytes.make(20_000, seed: 4)
    let earlyClient = try await first.client()
    try await earlyClient.send(
      Requests.uploadHead(port: first.port, encodedPath: "early.bin", length: early.count))
    try await earlyClient.send(early.prefix(1000))
    try await first.log.wait { $0.contains { if case .uploadStarted = $0 { true } else { false } } }
    let finishing = Task { try await first.server.finishHandingOverListener(grace: .seconds(60)) }
    try await Self.waitUntil { await first.server.isFinishing }

    // Far more than the limit arrive while the first session finishes.
    var clients: [(RawClient, String, [UInt8])] = []
    for index in 0..<20 {
      let name = "q\(index).bin"
      let body = TestBytes.make(500 + index, seed: UInt64(index))
      let client = try await first.client()
      try await client.send(
        Requests.uploadHead(port: first.port, encodedPath: name, length: body.count))
      try await client.send(body)
      clients.append((client, name, body))
    }
    try await earlyClient.send(early.dropFirst(1000))
    #expect(try await earlyClient.readReply().status == 201)
    let finished = try await finishing.value
    if let folder = finished.folder { try? FileManager.default.removeItem(at: folder) }
    let handover = try #require(finished.handover)
    #expect(handover.waitingCount <= limit, "parked: \(handover.waitingCount)")

    // A next session with room for them all (one with the same limit refuses what is over it,
    // as any session does with connections queued at once).
    let next = try await TestSession.start(on: handover)
    defer { Task { await next.stop() } }
    for (client, name, _) in clients {
      #expect(try await client.readReply().status == 201, "\(name)")
    }
    let expected = Dictionary(uniqueKeysWithValues: clients.map { ($0.1, $0.2) })
    #expect(next.stagedFiles() == expected)
  }

  @Test func aSecondFinishDuringTheGraceWaitsForItAndGetsTheSameFolder() async throws {
    let first = try await TestSession.start()
    defer { try? FileManager.default.removeItem(at: first.root) }
    let early = TestBytes.make(20_000, seed: 5)
    let earlyClient = try await Self.uploadInFlight(early, to: first)
    let finishing = Task { try await first.server.finishHandingOverListener(grace: .seconds(60)) }
    try await Self.waitUntil { await first.server.isFinishing }
    let finishAgain = Task { try await first.server.finish() }
    let handOverAgain = Task { try await first.server.finishHandingOverListener() }
    // Both calls wait for the first before the upload (and with it the grace) ends.
    try await Self.waitUntil { await first.server.callsWaitingForHandover == 2 }
    try await earlyClient.send(early.dropFirst(1000))
    #expect(try await earlyClient.readReply().status == 201)

    let finished = try await finishing.value
    let folder = try #require(finished.folder)
    defer { try? FileManager.default.removeItem(at: folder) }
    #expect(try await finishAgain.value == folder)
    let again = try await handOverAgain.value
    #expect(again.folder == folder)
    #expect(again.handover === finished.handover)
    #expect(try FileManager.default.subpathsOfDirectory(atPath: folder.path) == ["early.bin"])
  }

  @Test func aCancelDuringTheGraceEndsTheHandoverAtOnceOnAManualClock() async throws {
    // The grace never runs out on its own: only the cancel can end the wait.
    let clock = ManualClock()
    let first = try await TestSession.start(clock: clock)
    defer { try? FileManager.default.removeItem(at: first.root) }
    let early = TestBytes.make(20_000, seed: 6)
    let earlyClient = try await Self.uploadInFlight(early, to: first)
    let finishing = Task { try await first.server.finishHandingOverListener(grace: .seconds(60)) }
    try await Self.waitUntil { await first.server.isFinishing }
    await first.server.cancel()
    let outcome = try await Self.within(.seconds(20)) {
      do {
        _ = try await finishing.value
        return "returned"
      } catch BrowserDropError.sessionEnded {
        return "sessionEnded"
      } catch {
        return "\(error)"
      }
    }
    #expect(outcome == "sessionEnded")
    // Cut with the session, not answered.
    await #expect(throws: (any Error).self) { _ = try await earlyClient.readReply() }
  }

  /// A head still arriving when it is handed over keeps the idle timeout it was accepted with:
  /// a slow client gets one timeout in all, not a fresh one in every session.
  @Test(.timeLimit(.minutes(1)))
  func aParkedHalfHeadKeepsTheDeadlineItWasAcceptedWith() async throws {
    let clock = ManualClock()
    let first = try await TestSession.start(clock: clock) { $0.idleTimeout = .seconds(30) }
    defer { try? FileManager.default.removeItem(at: first.root) }
    let halfHead = try await first.client()
    try await halfHead.send("POST /upload?path=x HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    // Accepted, and waiting for the rest of its head until 30 s.
    await clock.deadlinesMade(1)
    clock.advance(by: .seconds(20))
    let finished = try await first.server.finishHandingOverListener()
    #expect(finished.folder == nil)
    let handover = try #require(finished.handover)
    #expect(handover.waitingCount == 1)
    let next = try await TestSession.start(clock: clock, on: handover) {
      $0.idleTimeout = .seconds(30)
    }
    defer { Task { await next.stop() } }
    // 30 s since it was accepted (a fresh timeout would run until 50 s).
    clock.advance(by: .seconds(10))
    #expect(try await halfHead.closedSilently())
  }

  /// Starts uploading `body` as `early.bin` and waits until the session admitted it; the first
  /// 1000 bytes are sent.
  private static func uploadInFlight(
    _ body: [UInt8], to session: TestSession
  ) async throws
    -> RawClient
  {
    let client = try await session.client()
    try await client.send(
      Requests.uploadHead(port: session.port, encodedPath: "early.bin", length: body.count))
    try await client.send(body.prefix(1000))
    try await session.log.wait {
      $0.contains { if case .uploadStarted = $0 { true } else { false } }
    }
    return client
  }

  /// `work`'s result, or a failed requirement when it takes longer than `limit` (it is then
  /// left running: what it awaits may not heed cancellation).
  private static func within(
    _ limit: Duration, _ work: @escaping @Sendable () async -> String
  ) async throws -> String {
    let (results, sink) = AsyncStream<String?>.makeStream()
    let worker = Task {
      sink.yield(await work())
    }
    let timer = Task {
      try? await Task.sleep(for: limit)
      sink.yield(nil)
    }
    var iterator = results.makeAsyncIterator()
    let result = await iterator.next() ?? nil
    timer.cancel()
    worker.cancel()
    return try #require(result, "still waiting after \(limit)")
  }

  /// Waits, bounded, for a state no event reports.
  private static func waitUntil(_ condition: () async -> Bool) async throws {
    let began = ContinuousClock.now
    while await !condition() {
      try #require(ContinuousClock.now - began < .seconds(20))
      try await Task.sleep(for: .milliseconds(5))
    }
  }
}

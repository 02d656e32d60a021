import BrowserDropSystem
import BrowserDropTestSupport
import Foundation
import Synchronization
import Testing

@testable import BrowserDrop

/// The resumable extension against the real server on 127.0.0.1, through raw sockets: cuts
/// anywhere, HEAD and PATCH, every refusal, preemption of a stale request, expiry on the
/// session clock, a restart on the same staging root, and the events a host sees.
@Suite("Resumable uploads through the real server")
struct ResumeTests {
  /// A resumable session on `root` (a new one unless given), its clock `clock`.
  static func start(
    root: URL? = nil, scope: ResumableUploads.Scope = .session,
    clock: any SessionClock = SystemSessionClock(),
    _ configure: (inout BrowserDropServer.Configuration) -> Void = { _ in }
  ) async throws -> TestSession {
    let root =
      root
      ?? FileManager.default.temporaryDirectory.appending(path: "bd-resume-\(UUID().uuidString)")
    var configuration = BrowserDropServer.Configuration()
    configuration.port = 0
    configuration.bindAddress = "127.0.0.1"
    configuration.stagingRoot = root
    configuration.reservedFreeSpace = 0
    configuration.resumableUploads = ResumableUploads(expiresAfter: .seconds(3600), scope: scope)
    configure(&configuration)
    let server = BrowserDropServer(
      configuration: configuration, pageBundle: PageSource.bundledFiles, clock: clock)
    let log = EventLog(server.events)
    let addresses = try await server.start()
    return TestSession(server: server, port: addresses[0].port, log: log, root: root)
  }

  /// Sends a POST of `body` with the client's id, cuts it after `count` body bytes (a clean
  /// close: the server reads them all) and waits until the server has paused it.
  static func cutPost(
    _ client: ResumeClient, _ body: [UInt8], after count: Int, pauses: PauseLog
  ) async throws {
    let before = await pauses.pausedCount
    let socket = try await RawClient.connect(port: client.port)
    try await socket.send(client.postHead(length: body.count))
    try await socket.send(Array(body[..<count]))
    socket.socket.close()
    try await pauses.waitForPaused(before + 1)
  }

  @Test func configAdvertisesTheExtensionOnlyWhenOn() async throws {
    let session = try await Self.start()
    defer { Task { await session.stop() } }
    let json = try #require(try await session.get("/config.json").json)
    #expect((json["resumable"] as? [String: Any])?["expiresAfter"] as? Int == 3600)
    let plain = try await TestSession.start()
    defer { Task { await plain.stop() } }
    let reply = try await plain.exchange(
      "HEAD /upload?path=a.txt&upload=\(ResumeClient.randomID()) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    )
    #expect(reply.status == 405, "HEAD /upload without the extension is protocol v1's 405")
  }

  /// The issue's main trial: a 256 MiB upload cut at 40 random points (in the request head,
  /// in the body with a clean close or a reset, and right after the last byte), resumed each
  /// time with HEAD and PATCH, ends byte for byte as sent. What was sent in total is the file
  /// plus what was in flight at each cut (sent but not on the disk when the next HEAD asked).
  @Test func aLargeUploadCutFortyTimesEndsByteIdentical() async throws {
    let session = try await Self.start()
    defer { Task { await session.stop() } }
    let size = 256 << 20
    let body = TestBytes.make(size, seed: 40)
    let seed = UInt64.random(in: 1...UInt64.max)
    var random = SeededGenerator(seed: seed)
    let client = ResumeClient(
      port: session.port, path: "Videos/long.bin", id: ResumeClient.randomID())
    // 40 cuts: 4 in a request head, 35 in the body at sorted random points, 1 after the last byte.
    let bodyCuts = (0..<35).map { _ in Int.random(in: 1..<size, using: &random) }.sorted()
    var plan: [Int?] = bodyCuts.map { $0 }
    for _ in 0..<4 { plan.insert(nil, at: Int.random(in: 0...plan.count, using: &random)) }
    plan.append(size)
    let pauses = PauseLog(session.server.pauses)
    var sent = 0
    var inFlight = 0
    var lastSent: Int?
    var admitted = 0
    var patches = 0
    for (index, cut) in plan.enumerated() {
      let known = admitted == 0 ? nil : try await client.offset()
      let offset = known ?? 0
      if let lastSent { inFlight += lastSent - offset }
      let head =
        known == nil
        ? client.postHead(length: size) : client.patchHead(offset: offset, length: size - offset)
      let socket = try await RawClient.connect(port: session.port)
      guard let cut else {
        // Half of the head, then gone: nothing is admitted, nothing changes.
        let bytes = Array(head.utf8)
        try await socket.send(Array(bytes[..<(bytes.count / 2)]))
        socket.reset()
        lastSent = offset
        continue
      }
      // The head, then the body once the server has admitted it (so that no request of an
      // earlier turn is still on its way when the next HEAD asks), then the cut: every other
      // one a reset, which drops what the server had not read yet.
      let pausedBefore = await pauses.pausedCount
      let eventsBefore = await session.log.events.count
      try await socket.send(head)
      if known == nil {
        try await session.log.wait { $0.count > eventsBefore }
      } else {
        patches += 1
        try await pauses.waitForResumed(patches)
      }
      admitted += 1
      let end = max(cut, offset)
      if end > offset { try? await socket.send(Array(body[offset..<end])) }
      sent += end - offset
      lastSent = end
      if index % 2 == 0 && end < size {
        socket.reset()
      } else {
        socket.socket.close()
      }
      if end < size {
        try await pauses.waitForPaused(pausedBefore + 1)
      } else {
        try await session.log.wait {
          $0.contains { if case .uploadFinished = $0 { true } else { false } }
        }
      }
    }
    // The last cut came after the last byte: the upload may have been stored before it, or
    // paused short of the end; HEAD tells, and the rest is sent.
    let standing = try await client.head()
    #expect(standing.status == 204)
    let offset = Int(standing.headers["upload-offset"] ?? "") ?? -1
    inFlight += (lastSent ?? 0) - offset
    if offset < size {
      let reply = try await client.exchange(
        client.patchHead(offset: offset, length: size - offset), body[offset...])
      #expect(reply.status == 201, "\(reply.text)")
      sent += size - offset
    }
    try await session.log.wait {
      $0.contains { if case .uploadFinished = $0 { true } else { false } }
    }
    let staged = session.stagedFiles()
    #expect(staged.count == 1)
    #expect(staged["Videos/long.bin"] == body, "the resumed file differs from what was sent")
    let events = await session.log.events
    #expect(events.filter { if case .uploadStarted = $0 { true } else { false } }.count == 1)
    #expect(events.filter { if case .uploadFailed = $0 { true } else { false } }.isEmpty)
    #expect(sent <= size + inFlight, "sent \(sent) for a \(size)-byte file, \(inFlight) in flight")
    print(
      "resume trial (seed \(seed)): 40 cuts, \(sent) body bytes sent for \(size) "
        + "(+\(sent - size), \(inFlight) in flight at the cuts)")
  }

  @Test func aCutPostIsKeptDurablyAndResumedByPatch() async throws {
    let session = try await Self.start()
    defer { Task { await session.stop() } }
    let pauses = PauseLog(session.server.pauses)
    let body = TestBytes.make(300_000, seed: 2)
    let client = ResumeClient(port: session.port, path: "a.bin", id: ResumeClient.randomID())
    try await Self.cutPost(client, body, after: 100_000, pauses: pauses)
    let head = try await client.head()
    #expect(head.status == 204)
    #expect(head.headers["upload-offset"] == "100000")
    #expect(head.headers["upload-length"] == "300000")
    #expect(await session.server.receivedFiles.isEmpty, "a partial is not a received file")
    #expect(session.stagedFiles().isEmpty)
    let reply = try await client.exchange(
      client.patchHead(offset: 100_000, length: 200_000), body[100_000...])
    #expect(reply.status == 201)
    #expect(reply.json?["path"] as? String == "a.bin")
    #expect(session.stagedFiles()["a.bin"] == body)
    let events = try await session.log.wait {
      $0.contains { if case .uploadFinished = $0 { true } else { false } }
    }
    let uploads = events.compactMap { event -> Upload? in
      if case .uploadStarted(let upload) = event { upload } else { nil }
    }
    #expect(uploads.count == 1)
    let upload = try #require(uploads.first)
    #expect(upload.size == 300_000)
    #expect(
      await pauses.all == [.paused(upload, keptBytes: 100_000), .resumed(upload, offset: 100_000)])
    // Complete: HEAD says so (a client that lost the 201 sends nothing again).
    let after = try await client.head()
    #expect(after.status == 204 && after.headers["upload-offset"] == "300000")
  }

  @Test func refusalsSayWhatIsWrongAndChangeNothing() async throws {
    let session = try await Self.start()
    defer { Task { await session.stop() } }
    let pauses = PauseLog(session.server.pauses)
    let body = TestBytes.make(50_000, seed: 3)
    let client = ResumeClient(port: session.port, path: "b/c.bin", id: ResumeClient.randomID())
    try await Self.cutPost(client, body, after: 20_000, pauses: pauses)
    #expect(try await client.offset() == 20_000)

    let mismatch = try await client.exchange(
      client.patchHead(offset: 10_000, length: 40_000), body[10_000...])
    #expect(mismatch.status == 409 && mismatch.errorCode == "offset_mismatch")
    #expect(mismatch.headers["upload-offset"] == "20000")

    let past = try await client.exchange(
      client.patchHead(offset: 20_000, length: 40_000),
      body[20_000...] + [1, 2, 3] + [UInt8](repeating: 0, count: 9_997))
    #expect(past.status == 409 && past.errorCode == "upload_mismatch", "\(past.text)")
    #expect(past.headers["upload-length"] == "50000")

    let otherPath = try await client.exchange(
      client.patchHead(offset: 20_000, length: 30_000, path: "other.bin"), body[20_000...])
    #expect(otherPath.status == 409 && otherPath.errorCode == "upload_mismatch")
    #expect(try await client.head(path: "other.bin").status == 409)

    let unknown = ResumeClient(port: session.port, path: "b/c.bin", id: ResumeClient.randomID())
    #expect(try await unknown.head().status == 404)
    let patchUnknown = try await unknown.exchange(unknown.patchHead(offset: 0, length: 1), [7])
    #expect(patchUnknown.status == 404 && patchUnknown.errorCode == "unknown_upload")

    for bad in ["short", "AAAAAAAAAAAAAAAAAAAAAB", "0123456789ABCDEF0123456789ABCDEF", "a+b", ""] {
      let reply = try await ResumeClient(port: session.port, path: "x.bin", id: bad).head()
      #expect(reply.status == 400, "id \(bad)")
    }
    let noOffset = try await session.exchange(
      "PATCH \(client.target) HTTP/1.1\r\nHost: \(client.host)\r\nContent-Length: 1\r\n\r\nx")
    #expect(noOffset.status == 400 && noOffset.errorCode == "bad_request")

    // None of it moved the upload or staged anything.
    #expect(try await client.offset() == 20_000)
    #expect(session.stagedFiles().isEmpty)
    let done = try await client.exchange(
      client.patchHead(offset: 20_000, length: 30_000), body[20_000...])
    #expect(done.status == 201)
    #expect(session.stagedFiles() == ["b/c.bin": body])
  }

  /// A POST left half-open (a Wi-Fi roam): HEAD releases it, keeping what it wrote, and the
  /// old connection ends.
  @Test func headReleasesAStaleRequestAndPatchContinues() async throws {
    let session = try await Self.start()
    defer { Task { await session.stop() } }
    let body = TestBytes.make(2 << 20, seed: 4)
    let client = ResumeClient(port: session.port, path: "stale.bin", id: ResumeClient.randomID())
    let stale = try await RawClient.connect(port: session.port)
    try await stale.send(client.postHead(length: body.count))
    try await stale.send(Array(body[..<(1 << 20)]))
    try await session.log.wait { !$0.isEmpty }
    // The stale request stays open and silent; a new one asks where the upload stands.
    let head = try await client.head()
    #expect(head.status == 204)
    let offset = try #require(Int(head.headers["upload-offset"] ?? ""))
    #expect(offset <= 1 << 20)
    #expect(try await stale.readToEnd().isEmpty, "the stale request was not ended")
    let reply = try await client.exchange(
      client.patchHead(offset: offset, length: body.count - offset), body[offset...])
    #expect(reply.status == 201)
    #expect(session.stagedFiles()["stale.bin"] == body)
  }

  /// A PATCH while another request (a stale POST, or a PATCH still running) holds the upload:
  /// the newer request takes it over. It proceeds when it starts where the old one stopped, and
  /// is told where that is (409) otherwise; either way the file ends right.
  @Test(arguments: ["POST", "PATCH"])
  func aPatchTakesOverFromARequestStillRunning(_ running: String) async throws {
    let session = try await Self.start()
    defer { Task { await session.stop() } }
    let pauses = PauseLog(session.server.pauses)
    let body = TestBytes.make(3 << 20, seed: 5)
    let client = ResumeClient(port: session.port, path: "race.bin", id: ResumeClient.randomID())
    var start = 0
    if running == "PATCH" {
      try await Self.cutPost(client, body, after: 500_000, pauses: pauses)
      start = try #require(try await client.offset())
    }
    let first = try await RawClient.connect(port: session.port)
    try await first.send(
      running == "POST"
        ? client.postHead(length: body.count)
        : client.patchHead(offset: start, length: body.count - start))
    // The first request holds the upload before the second comes.
    if running == "POST" {
      try await session.log.wait { !$0.isEmpty }
    } else {
      try await pauses.waitForResumed(1)
    }
    let sentByFirst = start + (1 << 20)
    try await first.send(Array(body[start..<sentByFirst]))
    let second = try await client.exchange(
      client.patchHead(offset: sentByFirst, length: body.count - sentByFirst), body[sentByFirst...])
    #expect(try await first.readToEnd().isEmpty, "the first request was not ended")
    if second.status != 201 {
      #expect(second.status == 409 && second.errorCode == "offset_mismatch")
      let offset = try #require(Int(second.headers["upload-offset"] ?? ""))
      #expect(offset < sentByFirst)
      let retry = try await client.exchange(
        client.patchHead(offset: offset, length: body.count - offset), body[offset...])
      #expect(retry.status == 201)
    }
    #expect(session.stagedFiles() == ["race.bin": body])
    let events = await session.log.events
    #expect(events.filter { if case .uploadStarted = $0 { true } else { false } }.count == 1)
  }

  @Test func aPausedUploadExpiresOnTheSessionClock() async throws {
    let clock = ManualClock()
    let session = try await Self.start(clock: clock)
    defer { Task { await session.stop() } }
    let pauses = PauseLog(session.server.pauses)
    let body = TestBytes.make(10_000, seed: 6)
    let client = ResumeClient(port: session.port, path: "old.bin", id: ResumeClient.randomID())
    try await Self.cutPost(client, body, after: 4_000, pauses: pauses)
    #expect(try await client.offset() == 4_000)
    clock.advance(by: .seconds(3599))
    #expect(try await client.offset() == 4_000, "expired early")
    clock.advance(by: .seconds(1))
    #expect(try await client.head().status == 404)
    let events = try await session.log.wait {
      $0.contains { if case .uploadFailed(_, .timedOut) = $0 { true } else { false } }
    }
    #expect(events.filter { if case .uploadFailed = $0 { true } else { false } }.count == 1)
    #expect(session.incomingEntries() == ["resumable"])
    let incoming = try #require(
      try FileManager.default.contentsOfDirectory(atPath: session.root.path).first {
        $0.hasSuffix(".incoming")
      })
    #expect(
      try FileManager.default.contentsOfDirectory(
        atPath: session.root.path + "/" + incoming + "/resumable"
      ).isEmpty, "the expired partial is still on the disk")
  }

  /// Finishing the session ends a paused upload (`.uploadFailed`, cancelled) and removes its
  /// bytes; nothing of it is handed over.
  @Test func finishingEndsPausedUploadsAndHandsOverOnlyCompleteFiles() async throws {
    let session = try await Self.start()
    let pauses = PauseLog(session.server.pauses)
    let body = TestBytes.make(10_000, seed: 7)
    _ = try await session.upload("done.txt", Array("hello".utf8))
    let client = ResumeClient(port: session.port, path: "half.bin", id: ResumeClient.randomID())
    try await Self.cutPost(client, body, after: 5_000, pauses: pauses)
    #expect(try await client.offset() == 5_000)
    let folder = try #require(try await session.server.finish())
    defer { try? FileManager.default.removeItem(at: session.root) }
    #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path) == ["done.txt"])
    let names = try FileManager.default.contentsOfDirectory(atPath: session.root.path)
    #expect(names == [folder.lastPathComponent], "the incoming folder and its partials stayed")
    let events = await session.log.events
    #expect(events.contains { if case .uploadFailed(_, .cancelled) = $0 { true } else { false } })
  }

  /// With the staging-root scope, a later server on the same root (the next kiosk batch, or the
  /// process started again) continues an upload an earlier one was cut off in.
  @Test func aLaterSessionOnTheSameRootResumes() async throws {
    let first = try await Self.start(scope: .stagingRoot)
    defer { try? FileManager.default.removeItem(at: first.root) }
    let firstPauses = PauseLog(first.server.pauses)
    let body = TestBytes.make(200_000, seed: 8)
    let id = ResumeClient.randomID()
    let before = ResumeClient(port: first.port, path: "Book/ch1.mp3.bin", id: id)
    try await Self.cutPost(before, body, after: 70_000, pauses: firstPauses)
    #expect(try await before.offset() == 70_000)
    _ = try await first.server.finish()

    let second = try await Self.start(root: first.root, scope: .stagingRoot)
    let pauses = PauseLog(second.server.pauses)
    let after = ResumeClient(port: second.port, path: "Book/ch1.mp3.bin", id: id)
    #expect(try await after.offset() == 70_000)
    let reply = try await after.exchange(
      after.patchHead(offset: 70_000, length: 130_000), body[70_000...])
    #expect(reply.status == 201)
    #expect(second.stagedFiles() == ["Book/ch1.mp3.bin": body])
    let events = try await second.log.wait {
      $0.contains { if case .uploadFinished = $0 { true } else { false } }
    }
    let started = events.compactMap { event -> Upload? in
      if case .uploadStarted(let upload) = event { upload } else { nil }
    }
    #expect(started.map(\.size) == [200_000], "the continued upload starts with its whole size")
    #expect(await pauses.all == [.resumed(started[0], offset: 70_000)])
    await second.stop()
  }

  /// While a kept upload of the staging root's store keeps arriving, what has arrived is made
  /// durable and recorded every `checkpointInterval` of the session clock, so that after a
  /// power cut (a reboot: only the recorded offset counts then) it goes on from there, not
  /// from 0.
  @Test(.timeLimit(.minutes(1)))
  func aLongUploadIsCheckpointedWhileItArrives() async throws {
    let clock = ManualClock()
    let session = try await Self.start(scope: .stagingRoot, clock: clock)
    defer { Task { await session.stop() } }
    let body = TestBytes.make(100_000, seed: 11)
    let client = ResumeClient(port: session.port, path: "long.bin", id: ResumeClient.randomID())
    let socket = try await RawClient.connect(port: client.port)
    try await socket.send(client.postHead(length: body.count))
    try await socket.send(Array(body[..<30_000]))
    let kept = session.root.path + "/.browserdrop-resumable/" + client.id
    // The partial file's size is the only sign that the server has written the bytes; no
    // event says so. Bounded: 10 s.
    for _ in 0..<1000 where ResumeStoreTests.size(kept + ".partial") != 30_000 {
      try await Task.sleep(for: .milliseconds(10))
    }
    #expect(ResumeStoreTests.size(kept + ".partial") == 30_000)
    await clock.sleeper(until: UploadReceiver.checkpointInterval)
    clock.advance(by: UploadReceiver.checkpointInterval)
    // Done once the next one waits.
    await clock.sleeper(until: UploadReceiver.checkpointInterval * 2)
    let record = try JSONDecoder().decode(
      ResumableStore.Record.self, from: Data(contentsOf: URL(filePath: kept + ".record")))
    #expect(record.offset == 30_000)
    try await socket.send(Array(body[30_000...]))
    #expect(try await socket.readReply().status == 201)
    #expect(session.stagedFiles() == ["long.bin": body])
  }

  /// Two servers on one staging root's store would remove and rewrite each other's files: the
  /// second one's start fails, naming the folder, and succeeds once the first has finished.
  @Test func aSecondServerOnTheSameRootDoesNotStart() async throws {
    let first = try await Self.start(scope: .stagingRoot)
    defer { try? FileManager.default.removeItem(at: first.root) }
    let folder = first.root.path + "/.browserdrop-resumable"
    do {
      let second = try await Self.start(root: first.root, scope: .stagingRoot)
      await second.server.cancel()
      Issue.record("a second server started on the same store")
    } catch BrowserDropError.stagingUnavailable(let path, let reason) {
      #expect(path == folder)
      #expect(reason.contains("another server"))
    }
    _ = try await first.server.finish()
    let third = try await Self.start(root: first.root, scope: .stagingRoot)
    _ = try await third.server.finish()
  }

  /// A server locked out of the store (its start failed because another server holds it)
  /// leaves that server's uploads alone when it is cancelled.
  @Test func aServerLockedOutOfTheStoreCancelsNothingOfTheOwners() async throws {
    let first = try await Self.start(scope: .stagingRoot)
    defer { Task { await first.stop() } }
    let pauses = PauseLog(first.server.pauses)
    let body = TestBytes.make(10_000, seed: 31)
    let client = ResumeClient(port: first.port, path: "kept.bin", id: ResumeClient.randomID())
    try await Self.cutPost(client, body, after: 4_000, pauses: pauses)
    var configuration = BrowserDropServer.Configuration()
    configuration.port = 0
    configuration.bindAddress = "127.0.0.1"
    configuration.stagingRoot = first.root
    configuration.reservedFreeSpace = 0
    configuration.resumableUploads = ResumableUploads(
      expiresAfter: .seconds(3600), scope: .stagingRoot)
    let second = BrowserDropServer(configuration: configuration)
    await #expect(throws: BrowserDropError.self) { _ = try await second.start() }
    await second.cancel()
    #expect(try await client.offset() == 4_000, "the owner's paused upload was removed")
  }

  /// Cancelling a session removes its paused uploads and what it stored, with their records,
  /// and leaves the records of uploads that earlier sessions stored and handed over: their
  /// pages still hear "complete".
  @Test func cancelKeepsWhatEarlierSessionsStored() async throws {
    let first = try await Self.start(scope: .stagingRoot)
    defer { try? FileManager.default.removeItem(at: first.root) }
    let body = TestBytes.make(50_000, seed: 21)
    let earlier = ResumeClient(port: first.port, path: "earlier.bin", id: ResumeClient.randomID())
    #expect(
      try await earlier.exchange(earlier.postHead(length: body.count), body[...]).status == 201)
    _ = try await first.server.finish()

    let second = try await Self.start(root: first.root, scope: .stagingRoot)
    let pauses = PauseLog(second.server.pauses)
    let stored = ResumeClient(port: second.port, path: "stored.bin", id: ResumeClient.randomID())
    #expect(try await stored.exchange(stored.postHead(length: body.count), body[...]).status == 201)
    let paused = ResumeClient(port: second.port, path: "paused.bin", id: ResumeClient.randomID())
    try await Self.cutPost(paused, body, after: 20_000, pauses: pauses)
    await second.server.cancel()
    let folder = first.root.path + "/.browserdrop-resumable/"
    let names = Set(try FileManager.default.contentsOfDirectory(atPath: folder))
    #expect(names.contains(earlier.id + ".record"), "an earlier session's record went")
    #expect(!names.contains(stored.id + ".record") && !names.contains(paused.id + ".record"))
    #expect(!names.contains(paused.id + ".partial"))

    let third = try await Self.start(root: first.root, scope: .stagingRoot)
    defer { Task { await third.stop() } }
    let again = ResumeClient(port: third.port, path: "earlier.bin", id: earlier.id)
    #expect(try await again.offset() == body.count)
    let gone = ResumeClient(port: third.port, path: "stored.bin", id: stored.id)
    #expect(try await gone.head().status == 404, "its file was deleted: the page sends it again")
  }

  /// A POST with the id of an upload whose request is finishing waits for it, and when that
  /// request stores the file, the POST hears "complete" (it stores nothing again). The
  /// finishing request is held in its last flush: the blocking pool's threads are all busy
  /// until the POST waits.
  @Test(.timeLimit(.minutes(1)))
  func aPostWaitingForAFinishingRequestHearsComplete() async throws {
    let session = try await Self.start()
    defer { Task { await session.stop() } }
    let body = TestBytes.make(60_000, seed: 23)
    let client = ResumeClient(port: session.port, path: "twice.bin", id: ResumeClient.randomID())
    let id = try UploadID(validating: Substring(client.id))
    let first = try await RawClient.connect(port: session.port)
    try await first.send(client.postHead(length: body.count))
    try await first.send(Array(body[..<(body.count - 1)]))
    let folder = session.server.sessionFolder
    let partial =
      folder.deletingLastPathComponent().path + "/." + folder.lastPathComponent
      + ".incoming/resumable/\(client.id).partial"
    // Admitted, and all but the last byte written. Bounded: 10 s.
    for _ in 0..<1000 where ResumeStoreTests.size(partial) != body.count - 1 {
      try await Task.sleep(for: .milliseconds(10))
    }
    try #require(ResumeStoreTests.size(partial) == body.count - 1)
    // Every thread of the blocking pool waits on a pipe, so the last byte's flush waits too.
    var pipeEnds: [Int32] = [0, 0]
    #expect(pipe(&pipeEnds) == 0)
    let (readEnd, writeEnd) = (pipeEnds[0], pipeEnds[1])
    defer { close(readEnd); close(writeEnd) }
    let busy = Atomic<Int>(0)
    let threads = 4
    var released = false
    func release() {
      guard !released else { return }
      released = true
      _ = Glibc.write(writeEnd, [UInt8](repeating: 1, count: threads), threads)
    }
    defer { release() }
    for _ in 0..<threads {
      BlockingPool.shared.submit {
        busy.add(1, ordering: .sequentiallyConsistent)
        var byte: UInt8 = 0
        _ = read(readEnd, &byte, 1)
      }
    }
    for _ in 0..<1000 where busy.load(ordering: .sequentiallyConsistent) < threads {
      try await Task.sleep(for: .milliseconds(10))
    }
    #expect(busy.load(ordering: .sequentiallyConsistent) == threads)
    try await first.send(Array(body[(body.count - 1)...]))
    // Every byte is written (the flush is what waits). Bounded: 10 s.
    for _ in 0..<1000 where ResumeStoreTests.size(partial) != body.count {
      try await Task.sleep(for: .milliseconds(10))
    }
    #expect(ResumeStoreTests.size(partial) == body.count)
    let second = try await RawClient.connect(port: session.port)
    try await second.send(client.postHead(length: body.count))
    try await second.send(body)
    // Bounded: 10 s. The POST waits for the first request's hold to end.
    for _ in 0..<1000 where await session.server.holdWaiters[id] == nil {
      try await Task.sleep(for: .milliseconds(10))
    }
    #expect(await session.server.holdWaiters[id] != nil, "the POST never waited")
    release()
    #expect(try await first.readReply().status == 201)
    let reply = try await second.readReply()
    #expect(reply.status == 409 && reply.errorCode == "offset_mismatch")
    #expect(reply.headers["upload-offset"] == String(body.count))
    #expect(session.stagedFiles() == ["twice.bin": body])
  }

  /// A plain v1 upload on a resumable session is what it always was: cut off, nothing stays.
  @Test func aPlainUploadCutOffLeavesNothing() async throws {
    let session = try await Self.start()
    defer { Task { await session.stop() } }
    let socket = try await session.client()
    try await socket.send(
      Requests.uploadHead(port: session.port, encodedPath: "p.bin", length: 1000))
    try await socket.send([UInt8](repeating: 1, count: 400))
    socket.socket.close()
    try await session.log.wait {
      $0.contains { if case .uploadFailed(_, .connectionLost) = $0 { true } else { false } }
    }
    #expect(session.incomingEntries() == ["resumable"])
  }
}

/// Collects a server's pause events; tests wait for a count of them, with a bound.
actor PauseLog {
  private typealias Waiter = (
    id: Int, predicate: @Sendable ([PauseEvent]) -> Bool,
    continuation: CheckedContinuation<Void, any Error>
  )
  private var nextID = 0
  private(set) var all: [PauseEvent] = []
  private var waiters: [Waiter] = []

  struct TimedOut: Error {}

  init(_ stream: AsyncStream<PauseEvent>) {
    Task { [weak self] in
      for await event in stream { await self?.append(event) }
    }
  }

  var pausedCount: Int { Self.count(all, resumed: false) }

  private static func count(_ events: [PauseEvent], resumed: Bool) -> Int {
    events.filter {
      switch $0 {
      case .paused: !resumed
      case .resumed: resumed
      }
    }.count
  }

  private func append(_ event: PauseEvent) {
    all.append(event)
    let events = all
    let ready = waiters.filter { $0.predicate(events) }
    waiters.removeAll { $0.predicate(events) }
    for waiter in ready { waiter.continuation.resume() }
  }

  /// Waits until `count` uploads have paused in all.
  func waitForPaused(_ count: Int) async throws {
    try await wait { Self.count($0, resumed: false) >= count }
  }

  /// Waits until `count` uploads have resumed in all.
  func waitForResumed(_ count: Int) async throws {
    try await wait { Self.count($0, resumed: true) >= count }
  }

  private func wait(
    timeout: Duration = .seconds(20), _ predicate: @escaping @Sendable ([PauseEvent]) -> Bool
  ) async throws {
    if predicate(all) { return }
    let id = nextID
    nextID += 1
    try await withCheckedThrowingContinuation { continuation in
      waiters.append((id, predicate, continuation))
      Task { [weak self] in
        try? await Task.sleep(for: timeout)
        await self?.expire(id)
      }
    }
  }

  /// Fails a waiter still waiting once its bound has passed.
  private func expire(_ id: Int) {
    guard let index = waiters.firstIndex(where: { $0.id == id }) else { return }
    waiters.remove(at: index).continuation.resume(throwing: TimedOut())
  }
}

import BrowserDropSystem
import BrowserDropTestSupport
import CBrowserDropLinux
import Foundation
import Testing

@testable import BrowserDrop

/// A paused upload's reservation of free space gives way to an upload that needs the room,
/// against the real server on 127.0.0.1.
///
/// Free space is the real volume's: each session's `reservedFreeSpace` is what is free now
/// less `room`, so uploads have `room` bytes to share. Every decision here is clear by several
/// gigabytes either way, so whatever else writes to this disk meanwhile changes none of them
/// (the disk needs no such space: nothing announced is ever written).
@Suite("Paused uploads' soft reservations through the real server")
struct SoftReservationTests {
  static let gib = 1 << 30

  /// A resumable session whose uploads share `room` bytes of the staging volume.
  static func start(
    room: Int, clock: any SessionClock = SystemSessionClock()
  ) async throws -> TestSession {
    var free: UInt64 = 0
    #expect(cbd_free_bytes(FileManager.default.temporaryDirectory.path, &free) == 0)
    return try await ResumeTests.start(clock: clock) { $0.reservedFreeSpace = Int(free) - room }
  }

  /// A resumable POST announcing `length` bytes that sends `count` of them after its `100
  /// Continue` and hangs up; returns once the server has paused it.
  static func pause(
    _ client: ResumeClient, length: Int, sending count: Int, pauses: PauseLog
  ) async throws {
    let before = await pauses.pausedCount
    let socket = try await RawClient.connect(port: client.port)
    try await socket.send(client.postHead(length: length, extra: ["Expect: 100-continue"]))
    #expect(try await socket.readReply().status == 100)
    if count > 0 { try await socket.send(TestBytes.make(count)) }
    socket.socket.close()
    try await pauses.waitForPaused(before + 1)
  }

  /// Sends the head of a plain upload of `length` bytes with `Expect: 100-continue` and returns
  /// the connection and the answer to the head: `100` admitted, or a refusal.
  static func announce(
    _ session: TestSession, _ path: String, length: Int
  ) async throws -> (RawClient, HTTPReply) {
    let client = try await session.client()
    try await client.send(
      Requests.uploadHead(
        port: session.port, encodedPath: path, length: length, extra: ["Expect: 100-continue"]))
    return (client, try await client.readReply())
  }

  /// The review's case: a client announces more than there is room for with an id, hangs up
  /// after the `100 Continue` with nothing sent, and is paused at 0. Its reservation does not
  /// refuse a later upload that fits, and it stays where it was.
  @Test func aPausedUploadThatSentNothingDoesNotRefuseALaterOne() async throws {
    let session = try await Self.start(room: 20 * Self.gib)
    defer { Task { await session.stop() } }
    let pauses = PauseLog(session.server.pauses)
    let hostile = ResumeClient(port: session.port, path: "huge.bin", id: ResumeClient.randomID())
    try await Self.pause(hostile, length: 19 * Self.gib, sending: 0, pauses: pauses)
    let head = try await hostile.head()
    #expect(head.status == 204)
    #expect(head.headers["upload-offset"] == "0")
    #expect(head.headers["upload-length"] == String(19 * Self.gib))

    // 4 GiB fits in the 20 GiB, not in the 1 GiB the paused upload leaves.
    let (later, reply) = try await Self.announce(session, "later.bin", length: 4 * Self.gib)
    #expect(reply.status == 100, "\(reply.status) \(reply.errorCode ?? "")")
    later.socket.close()

    // The paused upload keeps its id, record and offset.
    let after = try await hostile.head()
    #expect(after.status == 204)
    #expect(after.headers["upload-offset"] == "0")
    #expect(after.headers["upload-length"] == String(19 * Self.gib))
  }
}

extension SoftReservationTests {
  static func id(_ client: ResumeClient) throws -> UploadID {
    try UploadID(validating: Substring(client.id))
  }

  /// What the server's paused uploads reserve now, in the order they would give way.
  static func reservations(_ session: TestSession) async -> [ResumeTable.Reservation] {
    await session.server.resumeTable.softReservations(now: session.server.clock.now)
  }

  /// A paused upload that brought bytes keeps its room firmly for `firmReservation` (a phone's
  /// Wi-Fi roam): an upload that fits only in that room is refused meanwhile, and admitted
  /// once the time is up, the paused upload still standing where it was.
  @Test func aPauseWithProgressHoldsItsRoomForAWhile() async throws {
    let gib = Self.gib
    let clock = ManualClock()
    let session = try await Self.start(room: 20 * gib, clock: clock)
    defer { Task { await session.stop() } }
    let pauses = PauseLog(session.server.pauses)
    let roaming = ResumeClient(port: session.port, path: "video.bin", id: ResumeClient.randomID())
    try await Self.pause(roaming, length: 10 * gib, sending: 1 << 20, pauses: pauses)
    #expect(await Self.reservations(session).isEmpty, "firm: nothing may take its room")

    let (early, refused) = try await Self.announce(session, "early.bin", length: 12 * gib)
    #expect(refused.status == 507 && refused.errorCode == "insufficient_storage")
    early.socket.close()
    clock.advance(by: ResumeTable.firmReservation - .seconds(1))
    let (stillEarly, stillRefused) = try await Self.announce(session, "early.bin", length: 12 * gib)
    #expect(stillRefused.status == 507)
    stillEarly.socket.close()

    clock.advance(by: .seconds(1))
    let (later, admitted) = try await Self.announce(session, "later.bin", length: 12 * gib)
    #expect(admitted.status == 100, "\(admitted.status) \(admitted.errorCode ?? "")")
    later.socket.close()
    #expect(try await roaming.offset() == 1 << 20)
  }

  /// Two paused uploads: the one with the smaller fraction on the disk gives way first, and the
  /// other keeps its reservation while releasing one is enough.
  @Test func theLeastProgressedPausedUploadGivesWayFirst() async throws {
    let gib = Self.gib
    let clock = ManualClock()
    let session = try await Self.start(room: 20 * gib, clock: clock)
    defer { Task { await session.stop() } }
    let pauses = PauseLog(session.server.pauses)
    let fresh = ResumeClient(port: session.port, path: "fresh.bin", id: ResumeClient.randomID())
    let further = ResumeClient(
      port: session.port, path: "further.bin", id: ResumeClient.randomID())
    // Nothing of 10 GiB, and 1 MiB of 6 GiB: 16 GiB reserved, 4 left.
    try await Self.pause(fresh, length: 10 * gib, sending: 0, pauses: pauses)
    try await Self.pause(further, length: 6 * gib, sending: 1 << 20, pauses: pauses)
    #expect(try await further.offset() == 1 << 20)
    // The further one's room is firm for a while after its pause (`aPauseWithProgress…`).
    clock.advance(by: ResumeTable.firmReservation)
    let (freshID, furtherID) = (try Self.id(fresh), try Self.id(further))
    #expect(
      await Self.reservations(session) == [
        .init(id: freshID, bytes: 10 * gib), .init(id: furtherID, bytes: 6 * gib - (1 << 20)),
      ])

    // 8 GiB: the fresh upload's 10 are enough; the further one keeps its reservation.
    let (first, admitted) = try await Self.announce(session, "first.bin", length: 8 * gib)
    #expect(admitted.status == 100, "\(admitted.status) \(admitted.errorCode ?? "")")
    #expect(await Self.reservations(session) == [.init(id: furtherID, bytes: 6 * gib - (1 << 20))])
    // Another 8 GiB beside the first: the further one gives way too.
    let (second, alsoAdmitted) = try await Self.announce(session, "second.bin", length: 8 * gib)
    #expect(alsoAdmitted.status == 100, "\(alsoAdmitted.status) \(alsoAdmitted.errorCode ?? "")")
    #expect(await Self.reservations(session).isEmpty)
    // A third does not fit beside the two in flight, and nothing is left to give way.
    let (third, refused) = try await Self.announce(session, "third.bin", length: 8 * gib)
    #expect(refused.status == 507 && refused.errorCode == "insufficient_storage")
    for client in [first, second, third] { client.socket.close() }
    // Both paused uploads still stand where they were.
    #expect(try await fresh.offset() == 0)
    #expect(try await further.offset() == 1 << 20)
  }

  /// Paused uploads whose reservations were released: HEAD answers as before, adding
  /// `Upload-Space: insufficient` while the rest would not fit; a PATCH that has room completes,
  /// one that has not gets 507 with where the upload stands, and one resumed and cut off again
  /// reserves again.
  @Test func aReleasedUploadStillStandsAndResumesWhenThereIsRoom() async throws {
    let gib = Self.gib
    let mib = 1 << 20
    let clock = ManualClock()
    let session = try await Self.start(room: 20 * gib, clock: clock)
    defer { Task { await session.stop() } }
    let pauses = PauseLog(session.server.pauses)
    let small = ResumeClient(port: session.port, path: "small.bin", id: ResumeClient.randomID())
    let big = ResumeClient(port: session.port, path: "big.bin", id: ResumeClient.randomID())
    // Nothing of 2 MiB, and 1 MiB of 10 GiB: the small one gives way first.
    try await Self.pause(small, length: 2 * mib, sending: 0, pauses: pauses)
    try await Self.pause(big, length: 10 * gib, sending: mib, pauses: pauses)
    clock.advance(by: ResumeTable.firmReservation)

    // 12 GiB fits only with both released.
    let (arriving, admitted) = try await Self.announce(session, "arriving.bin", length: 12 * gib)
    #expect(admitted.status == 100, "\(admitted.status) \(admitted.errorCode ?? "")")
    #expect(await Self.reservations(session).isEmpty)
    let smallHead = try await small.head()
    #expect(smallHead.status == 204)
    #expect(smallHead.headers["upload-offset"] == "0")
    #expect(smallHead.headers["upload-length"] == String(2 * mib))
    #expect(smallHead.headers["upload-space"] == nil, "2 MiB fit beside the 12 GiB")
    let bigHead = try await big.head()
    #expect(bigHead.status == 204)
    #expect(bigHead.headers["upload-offset"] == String(mib))
    #expect(bigHead.headers["upload-length"] == String(10 * gib))
    #expect(bigHead.headers["upload-space"] == "insufficient", "\(bigHead.headers)")

    // Beside the 12 GiB arriving, the big one's rest does not fit: 507, saying where it stands.
    let short = try await big.exchange(big.patchHead(offset: mib, length: 10 * gib - mib), [])
    #expect(short.status == 507 && short.errorCode == "insufficient_storage")
    #expect(short.headers["upload-offset"] == String(mib))
    #expect(short.headers["upload-length"] == String(10 * gib))
    #expect(try await big.offset() == mib)
    // The small one's does: it completes.
    let body = TestBytes.make(2 * mib, seed: 9)
    let done = try await small.exchange(small.patchHead(offset: 0, length: body.count), body[...])
    #expect(done.status == 201, "\(done.status) \(done.text)")
    #expect(session.stagedFiles()["small.bin"] == body)

    // The 12 GiB gone, the big one's rest is admitted; cut off again, it reserves again.
    arriving.socket.close()
    try await session.log.wait {
      $0.contains {
        if case .uploadFailed(let upload, _) = $0 {
          upload.relativePath == "arriving.bin"
        } else {
          false
        }
      }
    }
    #expect(try await big.head().headers["upload-space"] == nil, "room again")
    let before = await pauses.pausedCount
    let resumed = try await RawClient.connect(port: session.port)
    try await resumed.send(
      big.patchHead(offset: mib, length: 10 * gib - mib, extra: ["Expect: 100-continue"]))
    #expect(try await resumed.readReply().status == 100)
    resumed.socket.close()
    try await pauses.waitForPaused(before + 1)
    #expect(
      await Self.reservations(session) == [.init(id: try Self.id(big), bytes: 10 * gib - mib)])
    #expect(try await big.offset() == mib)
  }

  /// An upload in flight, a resumable one too, keeps its reservation: only paused ones give way.
  @Test func uploadsInFlightNeverGiveWay() async throws {
    let gib = Self.gib
    let session = try await Self.start(room: 20 * gib)
    defer { Task { await session.stop() } }
    let pauses = PauseLog(session.server.pauses)
    let arriving = ResumeClient(
      port: session.port, path: "arriving.bin", id: ResumeClient.randomID())
    let stream = try await RawClient.connect(port: session.port)
    try await stream.send(arriving.postHead(length: 12 * gib, extra: ["Expect: 100-continue"]))
    #expect(try await stream.readReply().status == 100)
    try await stream.send([1])
    let paused = ResumeClient(port: session.port, path: "paused.bin", id: ResumeClient.randomID())
    try await Self.pause(paused, length: 6 * gib, sending: 0, pauses: pauses)

    // 5 GiB: 2 left beside the 12 arriving and the 6 paused; the paused one gives way.
    let (first, admitted) = try await Self.announce(session, "first.bin", length: 5 * gib)
    #expect(admitted.status == 100, "\(admitted.status) \(admitted.errorCode ?? "")")
    #expect(await Self.reservations(session).isEmpty)
    // 6 GiB: 3 left beside the two in flight. Either one's reservation would make room; neither
    // gives way.
    let (second, refused) = try await Self.announce(session, "second.bin", length: 6 * gib)
    #expect(refused.status == 507 && refused.errorCode == "insufficient_storage")
    #expect(await session.server.resumeTable.hold(of: try Self.id(arriving)) != nil)
    #expect(await pauses.pausedCount == 1, "the arriving upload was stopped")
    for client in [stream, first, second] { client.socket.close() }
  }
}

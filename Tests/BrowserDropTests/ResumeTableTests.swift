import Testing

@testable import BrowserDrop

/// The resumable extension's rules without sockets: which ids are accepted, the order of a
/// PATCH's checks, what paused uploads hold of the free space, and expiry.
@Suite("Resumable uploads' rules, as pure values")
struct ResumeTableTests {
  static func id(_ text: String) throws -> UploadID { try UploadID(validating: Substring(text)) }

  @Test func idsAre128BitsSpelledOneWay() throws {
    #expect(throws: Never.self) { try Self.id("AAAAAAAAAAAAAAAAAAAAAA") }
    #expect(throws: Never.self) { try Self.id("_-_-_-_-_-_-_-_-_-_-_w") }
    #expect(throws: Never.self) { try Self.id("0123456789abcdef0123456789abcdef") }
    // 132 bits in 22 digits: the last digit's low bits must be zero.
    for bad in [
      "AAAAAAAAAAAAAAAAAAAAAB", "AAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAAA",
      "0123456789ABCDEF0123456789ABCDEF", "AAAAAAAAAAAAAAAAAAAA+w", "AAAAAAAAAAAAAAAAAAAA%2",
      "", "../../etc/passwd",
    ] {
      #expect(throws: Refusal.self, "\(bad)") { try Self.id(bad) }
    }
    #expect(throws: Refusal.self) {
      _ = try UploadID.find(
        inQuery: "path=a&upload=AAAAAAAAAAAAAAAAAAAAAA&upload=AAAAAAAAAAAAAAAAAAAAAA")
    }
    #expect(try UploadID.find(inQuery: "path=a") == nil)
  }

  @Test func aPatchIsCheckedInOrder() throws {
    var table = ResumeTable()
    let a = try Self.id("AAAAAAAAAAAAAAAAAAAAAA")
    let path = try UploadPath(validating: "a.bin")
    let other = try UploadPath(validating: "b.bin")
    let upload = Upload(id: 1, relativePath: "a.bin", size: 100)
    #expect(table.checkResume(a, path: path, offset: 0, size: 100).refusal?.error == .unknownUpload)
    let hold = UploadHold()
    _ = table.start(a, path: path, length: 100, upload: upload, hold: hold)
    #expect(
      table.checkResume(a, path: other, offset: 0, size: 100).refusal?.error == .uploadMismatch)
    #expect(table.checkResume(a, path: path, offset: 0, size: 100) == .held)
    table.pause(a, hold: UploadHold(), offset: 40, expiresAt: .seconds(10))
    #expect(
      table.checkResume(a, path: path, offset: 0, size: 100) == .held, "another hold paused it")
    table.pause(a, hold: hold, offset: 40, expiresAt: .seconds(10))
    let mismatch = table.checkResume(a, path: path, offset: 0, size: 100).refusal
    #expect(mismatch?.error == .offsetMismatch && mismatch?.uploadOffset == 40)
    let past = table.checkResume(a, path: path, offset: 40, size: 61).refusal
    #expect(past?.error == .uploadMismatch && past?.uploadLength == 100)
    #expect(
      table.checkResume(a, path: path, offset: 40, size: 60)
        == .proceed(.init(upload: upload, length: 100, offset: 40)))
    _ = table.complete(a, expiresAt: .seconds(100))
    #expect(table.standing(a, path: path) == .complete(length: 100))
    #expect(table.checkResume(a, path: path, offset: 100, size: 0).refusal?.uploadOffset == 100)
  }

  /// A paused upload keeps its remaining bytes reserved: admission counts what it is given of
  /// them, and a fresh measurement that would fit without them gets 507 (the server gives it
  /// less once they have given way: `pausedReservationsGiveWayToAnUploadThatFitsWithoutThem`).
  @Test func pausedUploadsKeepTheirSpace() throws {
    var table = ResumeTable()
    let a = try Self.id("AAAAAAAAAAAAAAAAAAAAAA")
    let hold = UploadHold()
    let path = try UploadPath(validating: "a.bin")
    _ = table.start(
      a, path: path, length: 1000, upload: Upload(id: 1, relativePath: "a.bin", size: 1000),
      hold: hold)
    #expect(table.pausedRemaining() == 0, "an arriving upload is counted by admission instead")
    table.pause(a, hold: hold, offset: 300, expiresAt: .seconds(5))
    #expect(table.pausedRemaining() == 700)
    #expect(table.pausedRemaining(excluding: a) == 0)
    var admission = UploadAdmission(reservedFreeSpace: 0)
    let refused = admission.admit(
      try UploadPath(validating: "b.bin"), size: 400, freeBytes: 1000, conflict: nil, now: .zero,
      alsoPending: table.pausedRemaining())
    #expect(refused.resumeRefusal?.error == .insufficientStorage)
    let fits = admission.admit(
      try UploadPath(validating: "b.bin"), size: 300, freeBytes: 1000, conflict: nil, now: .zero,
      alsoPending: table.pausedRemaining())
    #expect(fits.resumeTicket != nil)
    // Continued, it is weighed by what it has left, and its progress starts at its offset.
    let resumed = admission.admit(
      path, size: 700, freeBytes: 2000, conflict: nil, now: .zero,
      alsoPending: table.pausedRemaining(excluding: a),
      continuing: .init(upload: nil, length: 1000, offset: 300))
    let ticket = try #require(resumed.resumeTicket)
    #expect(ticket.upload.size == 1000 && ticket.counter.bytes == 300)
    // Expired, it holds nothing.
    #expect(table.expire(now: .seconds(4)).isEmpty)
    #expect(table.expire(now: .seconds(5)).count == 1)
    #expect(table.pausedRemaining() == 0)
  }
}

extension ResumeTable.ResumeCheck {
  var refusal: Refusal? {
    if case .refuse(let refusal) = self { refusal } else { nil }
  }
}

extension UploadAdmission.Decision {
  fileprivate var resumeRefusal: Refusal? {
    if case .refuse(let refusal) = self { refusal } else { nil }
  }

  fileprivate var resumeTicket: UploadTicket? {
    if case .accept(let ticket, _) = self { ticket } else { nil }
  }
}

extension ResumeTableTests {
  /// A stored upload is remembered until it expires (the newest `completedMemory` of them): a
  /// POST or PATCH of its id is refused with where it stands, complete.
  @Test func storedUploadsAreRememberedUntilTheyExpire() throws {
    var table = ResumeTable()
    let a = try Self.id("AAAAAAAAAAAAAAAAAAAAAA")
    let path = try UploadPath(validating: "a.bin")
    let hold = UploadHold()
    _ = table.start(
      a, path: path, length: 100, upload: Upload(id: 1, relativePath: "a.bin", size: 100),
      hold: hold)
    #expect(table.checkStart(a, path: path) == nil, "not stored yet")
    #expect(table.complete(a, expiresAt: .seconds(10)) == nil)
    let again = try #require(table.checkStart(a, path: path))
    #expect(again.error == .offsetMismatch && again.uploadOffset == 100)
    #expect(again.uploadLength == 100)
    #expect(
      table.checkStart(a, path: try UploadPath(validating: "b.bin"))?.error == .uploadMismatch)
    #expect(table.expireCompleted(now: .seconds(9)).isEmpty)
    #expect(table.expireCompleted(now: .seconds(10)) == [a])
    #expect(table.standing(a, path: path) == .unknown)

    // Past the memory, the oldest is forgotten, and named so that its record goes too.
    var first: UploadID?
    for n in 0...ResumeTable.completedMemory {
      let hex = String(n, radix: 16)
      let id = try Self.id(String(repeating: "0", count: 32 - hex.count) + hex)
      if first == nil { first = id }
      let forgotten = table.recoveredComplete(
        id, path: path, length: 1, expiresAt: .seconds(Int64(20 + n)))
      #expect(forgotten == (n == ResumeTable.completedMemory ? first : nil))
    }
  }
}

extension ResumeTableTests {
  /// Paused uploads `a`, `b`, `c` of one path; `hold` for one still arriving.
  static func pausedTable() throws -> (ResumeTable, [UploadID]) {
    var table = ResumeTable()
    let path = try UploadPath(validating: "a.bin")
    let ids = try ["A", "Q", "g", "w"].map { try Self.id(String(repeating: "A", count: 21) + $0) }
    // (length, offset, paused until): ids[0] a tenth done, ids[1] and ids[2] nothing done
    // (ids[2] paused earlier), ids[3] still arriving.
    let shapes = [(1000, 100, 50), (1000, 0, 60), (4000, 0, 40), (1000, 0, 0)]
    for (index, (length, offset, expiresAt)) in shapes.enumerated() {
      let hold = UploadHold()
      _ = table.start(
        ids[index], path: path, length: length,
        upload: Upload(id: UInt64(index + 1), relativePath: "a.bin", size: length), hold: hold)
      if index < 3 {
        table.pause(ids[index], hold: hold, offset: offset, expiresAt: .seconds(expiresAt))
      }
    }
    return (table, ids)
  }

  /// Paused uploads give way least progressed first, the one paused longest ago first among
  /// equals; one still arriving is never listed (admission counts it, as in flight).
  @Test func pausedUploadsGiveWayLeastProgressedFirst() throws {
    let (table, ids) = try Self.pausedTable()
    #expect(
      table.softReservations() == [
        .init(id: ids[2], bytes: 4000), .init(id: ids[1], bytes: 1000),
        .init(id: ids[0], bytes: 900),
      ])
    #expect(table.pausedRemaining() == 5900)
    #expect(table.softReservations(excluding: ids[2]).map(\.id) == [ids[1], ids[0]])
  }

  /// A released reservation: the upload still stands where it was, a PATCH may continue it,
  /// and it reserves nothing until it pauses again. An arriving upload's is never released.
  @Test func aReleasedUploadKeepsEverythingButItsReservation() throws {
    let made = try Self.pausedTable()
    var table = made.0
    let ids = made.1
    let path = try UploadPath(validating: "a.bin")
    table.releaseReservations([ids[2], ids[3]])
    #expect(table.softReservations().map(\.id) == [ids[1], ids[0]])
    #expect(table.pausedRemaining() == 1900)
    #expect(table.standing(ids[2], path: path) == .paused(offset: 0, length: 4000))
    #expect(table.standing(ids[3], path: path) == .held)
    #expect(table.expire(now: .seconds(39)).isEmpty, "released early")
    // Resumed and cut off again, it reserves what it has left.
    let hold = UploadHold()
    guard case .proceed(let snapshot) = table.checkResume(ids[2], path: path, offset: 0, size: 4000)
    else {
      Issue.record("a released upload could not be resumed")
      return
    }
    #expect(snapshot.offset == 0 && snapshot.length == 4000)
    table.resume(ids[2], upload: Upload(id: 3, relativePath: "a.bin", size: 4000), hold: hold)
    #expect(table.pausedRemaining() == 1900, "an arriving upload is counted by admission")
    table.pause(ids[2], hold: hold, offset: 3000, expiresAt: .seconds(90))
    #expect(table.softReservations().map(\.id) == [ids[1], ids[0], ids[2]])
    #expect(table.pausedRemaining() == 2900)
    // The one that was arriving when its reservation was asked to go reserves once paused.
    let arriving = try #require(table.hold(of: ids[3]))
    table.pause(ids[3], hold: arriving, offset: 0, expiresAt: .seconds(95))
    #expect(table.softReservations().map(\.id) == [ids[1], ids[3], ids[0], ids[2]])
  }

  /// A pause that brought bytes sets the expiry and makes the reservation firm until
  /// `firmUntil`; a request that brought nothing moves neither (so requests that send nothing
  /// never keep an upload alive or its room held).
  @Test func onlyAPauseThatBroughtBytesRenewsExpiryAndFirmness() throws {
    var table = ResumeTable()
    let path = try UploadPath(validating: "a.bin")
    let id = try Self.id(String(repeating: "A", count: 22))
    let upload = Upload(id: 1, relativePath: "a.bin", size: 1000)
    var hold = UploadHold()
    _ = table.start(id, path: path, length: 1000, upload: upload, hold: hold)
    table.pause(id, hold: hold, offset: 100, expiresAt: .seconds(50), firmUntil: .seconds(20))
    #expect(table.firmRemaining(now: .seconds(19)) == 900)
    #expect(table.softReservations(now: .seconds(19)).isEmpty)
    #expect(table.firmRemaining(now: .seconds(20)) == 0)
    #expect(table.softReservations(now: .seconds(20)).map(\.bytes) == [900])
    #expect(table.pausedRemaining() == 900)
    // Resumed, and cut off before a byte arrived.
    hold = UploadHold()
    table.resume(id, upload: upload, hold: hold)
    table.pause(id, hold: hold, offset: 100, expiresAt: .seconds(90), firmUntil: .seconds(60))
    #expect(table.firmRemaining(now: .seconds(30)) == 0, "not firm again")
    #expect(table.expire(now: .seconds(49)).isEmpty)
    #expect(table.expire(now: .seconds(50)).map(\.0) == [id], "not kept alive")
  }

  /// Progress is compared at full width: lengths as large as an `Int` holds do not overflow.
  @Test func progressIsComparedWithoutOverflow() throws {
    var table = ResumeTable()
    let path = try UploadPath(validating: "a.bin")
    let (big, small) = (
      try Self.id("AAAAAAAAAAAAAAAAAAAAAA"), try Self.id("AAAAAAAAAAAAAAAAAAAAAQ")
    )
    // big: just under half done; small: exactly half.
    for (id, length, offset) in [(big, Int.max, Int.max / 2), (small, 2, 1)] {
      let hold = UploadHold()
      _ = table.start(
        id, path: path, length: length,
        upload: Upload(id: 1, relativePath: "a.bin", size: length), hold: hold)
      table.pause(id, hold: hold, offset: offset, expiresAt: .seconds(10))
    }
    #expect(table.softReservations().map(\.id) == [big, small])
    #expect(table.pausedRemaining() == Int.max - Int.max / 2 + 1)
    #expect(
      ResumeTable.total([.init(id: big, bytes: .max), .init(id: small, bytes: 1)]) == .max,
      "the total saturates")
  }
}

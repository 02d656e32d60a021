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

  /// A paused upload keeps its remaining bytes reserved: admission counts them, and a fresh
  /// measurement that would fit without them gets 507.
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

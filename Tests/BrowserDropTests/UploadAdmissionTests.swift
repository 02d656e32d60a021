import Testing

@testable import BrowserDrop

/// `UploadAdmission`'s rules without sockets: conflicts, free space counting uploads in flight,
/// how long a measurement is trusted, and when the progress task runs. Time is an argument, so
/// the lifetime of a figure is checked to the nanosecond.
@Suite("Admission and free-space accounting, as a state machine")
struct UploadAdmissionTests {
  static let mib = 1 << 20

  /// Asks `admission` about an upload of `size` bytes named `name`.
  static func admit(
    _ admission: inout UploadAdmission, _ name: String, size: Int, freeBytes: Int?,
    conflict: Refusal? = nil, now: Duration = .zero, alsoPending: Int = 0
  ) throws -> UploadAdmission.Decision {
    admission.admit(
      try UploadPath(validating: name), size: size, freeBytes: freeBytes, conflict: conflict,
      now: now, alsoPending: alsoPending)
  }

  @Test func aConflictRefusesBeforeSpaceIsWeighed() throws {
    var admission = UploadAdmission(reservedFreeSpace: 0)
    let conflict = Refusal(.pathConflict, "a is already a folder in this session.")
    let decision = try Self.admit(&admission, "a", size: 1, freeBytes: nil, conflict: conflict)
    #expect(decision.refusal == conflict)
  }

  @Test func withoutAFigureItAsksForAMeasurementThenDecides() throws {
    var admission = UploadAdmission(reservedFreeSpace: 10 * Self.mib)
    let unmeasured = try Self.admit(&admission, "a.bin", size: Self.mib, freeBytes: nil)
    #expect(unmeasured.measures)
    let short = try Self.admit(&admission, "a.bin", size: Self.mib, freeBytes: 10 * Self.mib)
    #expect(short.refusal?.error == .insufficientStorage)
    let exact = try Self.admit(&admission, "a.bin", size: Self.mib, freeBytes: 11 * Self.mib)
    let (ticket, startsProgress) = try #require(exact.accepted)
    #expect(ticket.upload == Upload(id: 1, relativePath: "a.bin", size: Self.mib))
    #expect(startsProgress)
    #expect(admission.isInFlight(1))
  }

  /// Within 250 ms of a measurement, uploads are admitted without one, every byte admitted
  /// since counted as written; at 250 ms the figure is too old.
  @Test func aFigureIsTrustedForItsLifetimeAndNoLonger() throws {
    var admission = UploadAdmission(reservedFreeSpace: 0)
    let start = Duration.seconds(7)
    let justInTime = start + FreeSpaceEstimate.lifetime - .nanoseconds(1)
    let a = try Self.admit(&admission, "a", size: 4, freeBytes: 20, now: start)
    #expect(a.accepted != nil)
    let b = try Self.admit(&admission, "b", size: 6, freeBytes: nil, now: justInTime)
    #expect(b.accepted != nil, "a fresh figure was not used")
    // 20 measured, 10 admitted since counted as written and the same 10 as still to come: the
    // estimate errs twice on the safe side, and nothing is left to admit from it.
    let c = try Self.admit(&admission, "c", size: 1, freeBytes: nil, now: justInTime)
    #expect(c.measures, "the estimate forgot what was admitted")
    admission.end(1)
    admission.end(2)
    let d = try Self.admit(&admission, "d", size: 1, freeBytes: 1, now: justInTime)
    #expect(d.accepted != nil)
    let late = justInTime + FreeSpaceEstimate.lifetime
    let e = try Self.admit(&admission, "e", size: 0, freeBytes: nil, now: late)
    #expect(e.measures, "an old figure was trusted")
  }

  @Test func bytesStillToComeCountAgainstAFreshMeasurement() throws {
    var admission = UploadAdmission(reservedFreeSpace: 0)
    let a = try Self.admit(&admission, "a", size: 100, freeBytes: 150)
    let (first, _) = try #require(a.accepted)
    // 100 still to come of `a`: 60 more don't fit in a fresh 150.
    let b = try Self.admit(&admission, "b", size: 60, freeBytes: 150)
    #expect(b.refusal?.error == .insufficientStorage, "in-flight bytes were not counted")
    first.counter.add(100)  // `a` has written everything: the disk figure includes it now
    let again = try Self.admit(&admission, "b", size: 60, freeBytes: 60)
    #expect(again.accepted != nil, "written bytes were counted twice")
  }

  @Test func hugeSizesAndReservationsNeverOverflow() throws {
    var reserved = UploadAdmission(reservedFreeSpace: Int.max)
    let a = try Self.admit(&reserved, "a", size: Int.max, freeBytes: 0)
    #expect(a.refusal?.error == .insufficientStorage)
    var unreserved = UploadAdmission(reservedFreeSpace: 0)
    let b = try Self.admit(&unreserved, "a", size: Int.max, freeBytes: Int.max - 1)
    #expect(b.refusal?.error == .insufficientStorage)
  }

  /// The progress task starts with the first upload, lists uploads in the order they started,
  /// and stops (the next upload starting a new one) when none is left.
  @Test func progressRunsWhileUploadsAreInFlight() throws {
    var admission = UploadAdmission(reservedFreeSpace: 0)
    var tickets: [UploadTicket] = []
    for (index, name) in ["b", "a"].enumerated() {
      let decision = try Self.admit(&admission, name, size: 10, freeBytes: 100)
      let (ticket, startsProgress) = try #require(decision.accepted)
      #expect(startsProgress == (index == 0))
      tickets.append(ticket)
    }
    tickets[1].counter.add(3)
    let listed = admission.nextProgressStep()
    #expect(
      listed
        == .publish([
          UploadProgress(upload: tickets[0].upload, receivedBytes: 0),
          UploadProgress(upload: tickets[1].upload, receivedBytes: 3),
        ]))
    let ended = admission.end(tickets[0].upload.id)
    let endedAgain = admission.end(tickets[0].upload.id)
    #expect(ended && !endedAgain)
    admission.end(tickets[1].upload.id)
    let step = admission.nextProgressStep()
    #expect(step == .finish)
    let next = try Self.admit(&admission, "c", size: 1, freeBytes: 100)
    #expect(next.accepted?.startsProgress == true)
  }
}

extension UploadAdmission.Decision {
  fileprivate var accepted: (ticket: UploadTicket, startsProgress: Bool)? {
    if case .accept(let ticket, let startsProgress) = self { (ticket, startsProgress) } else { nil }
  }

  fileprivate var refusal: Refusal? { if case .refuse(let refusal) = self { refusal } else { nil } }

  fileprivate var measures: Bool { if case .measureFreeSpace = self { true } else { false } }
}

extension UploadAdmissionTests {
  /// Paused uploads' reservations give way, the fewest from the front, only when the upload
  /// would fit without them and only to a fresh measurement; uploads in flight never do.
  @Test func pausedReservationsGiveWayToAnUploadThatFitsWithoutThem() throws {
    var admission = UploadAdmission(reservedFreeSpace: 10)
    // 100 free, 10 kept free: 90 for uploads; 30 in flight.
    let arriving = try Self.admit(&admission, "in-flight", size: 30, freeBytes: 100)
    #expect(arriving.accepted != nil)
    let paused = [25, 20, 15]
    func release(_ size: Int, freeBytes: Int? = 100) -> Int {
      admission.reservationsToRelease(size: size, freeBytes: freeBytes, softPending: paused)
    }
    #expect(release(0) == 0, "fits beside them all")
    #expect(release(1) == 1, "the first gives way")
    #expect(release(25) == 1)
    #expect(release(26) == 2)
    #expect(release(45) == 2)
    #expect(release(46) == 3)
    #expect(release(60) == 3)
    #expect(release(61) == 0, "not even without them: refused, nothing gives way")
    #expect(release(26, freeBytes: nil) == 0, "only a fresh measurement releases")
    #expect(admission.reservationsToRelease(size: 1, freeBytes: 100, softPending: []) == 0)
    // As large as an `Int` holds, without trapping.
    #expect(
      admission.reservationsToRelease(size: 1, freeBytes: 100, softPending: [.max, .max, 5]) == 2)
    #expect(
      admission.reservationsToRelease(size: 1, freeBytes: .max, softPending: [.max, .max]) == 2)
    // What is left after the release is what admission counts; admitted.
    let admitted = try Self.admit(
      &admission, "b", size: 46, freeBytes: 100, alsoPending: paused.dropFirst(3).reduce(0, +))
    #expect(admitted.accepted != nil)
    let refused = try Self.admit(&admission, "c", size: 46, freeBytes: 100, alsoPending: .max)
    #expect(refused.refusal?.error == .insufficientStorage)
  }
}

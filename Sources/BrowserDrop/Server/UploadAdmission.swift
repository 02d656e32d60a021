/// Which uploads are in flight and whether another may start: name conflicts, then free space
/// counting what the uploads in flight still have to write. A pure state machine (after the
/// connection pool of async-http-client): its mutating methods return what to do, and its
/// owner, the server actor, does it (sends events, measures, starts the progress task). Time
/// comes in as `now`, so the rules are tested without sockets or sleeps.
struct UploadAdmission {
  /// What `admit` decided.
  enum Decision {
    /// Start receiving. Send `.uploadStarted`; start the progress task when
    /// `startPublishingProgress`.
    case accept(UploadTicket, startPublishingProgress: Bool)
    case refuse(Refusal)
    /// The free-space figure is too old to decide with: measure (`statvfs`) and ask again.
    case measureFreeSpace
  }

  /// What the progress task does next.
  enum ProgressStep: Equatable {
    /// Publish this list, then wait for ``progressInterval``.
    case publish([UploadProgress])
    /// Nothing is in flight: publish the empty list and stop.
    case finish
  }

  /// The progress stream's throttle: at most about ten lists a second.
  static let progressInterval = Duration.milliseconds(100)

  private struct InFlight {
    let upload: Upload
    let counter: ProgressCounter
  }

  /// Free space always left on the staging volume.
  let reservedFreeSpace: Int
  private var inFlight: [UInt64: InFlight] = [:]
  private var nextUploadID: UInt64 = 1
  private var freeSpace = FreeSpaceEstimate()
  private var publishingProgress = false

  init(reservedFreeSpace: Int) {
    self.reservedFreeSpace = reservedFreeSpace
  }

  /// An upload being continued (the resumable extension): the same `Upload` when this session
  /// started it, its whole length, and the bytes already on the disk.
  struct Continuation {
    var upload: Upload?
    var length: Int
    var offset: Int
  }

  /// Whether an upload of that id is in flight.
  func isInFlight(_ id: UInt64) -> Bool { inFlight[id] != nil }

  /// Whether any upload is in flight.
  var hasInFlight: Bool { !inFlight.isEmpty }

  /// Decides whether an upload of `size` bytes may start as `path`, `conflict` being what the
  /// session's index says of the name.
  ///
  /// `freeBytes` is a fresh measurement, or `nil` to decide from the last one when that is
  /// recent and the answer is clear even counting every byte admitted since as written;
  /// otherwise the answer is `.measureFreeSpace`.
  ///
  /// `alsoPending` is what paused uploads that can still be resumed reserve (those that would
  /// give way are left out first: `reservationsToRelease`); `size` of a `continuing` upload is
  /// what it has left, its `Upload` keeps the whole length and its progress starts at its
  /// offset.
  mutating func admit(
    _ path: UploadPath, size: Int, freeBytes: Int?, conflict: Refusal?, now: Duration,
    alsoPending: Int = 0, continuing: Continuation? = nil
  ) -> Decision {
    if let conflict { return .refuse(conflict) }
    let pending = inFlightRemaining.addingSaturated(alsoPending)
    if let freeBytes {
      freeSpace.record(freeBytes, at: now)
      if !fits(size, in: freeBytes - pending) { return .refuse(Refusal(.insufficientStorage)) }
    } else {
      guard let estimate = freeSpace.pessimisticEstimate(at: now),
        fits(size, in: estimate - pending)
      else { return .measureFreeSpace }
    }
    freeSpace.admitted(size)
    let upload: Upload
    if let existing = continuing?.upload {
      upload = existing
    } else {
      upload = Upload(
        id: nextUploadID, relativePath: path.value, size: continuing?.length ?? size)
      nextUploadID += 1
    }
    let counter = ProgressCounter()
    if let continuing { counter.add(continuing.offset) }
    inFlight[upload.id] = InFlight(upload: upload, counter: counter)
    let startPublishing = !publishingProgress
    publishingProgress = true
    return .accept(
      UploadTicket(upload: upload, path: path, counter: counter),
      startPublishingProgress: startPublishing)
  }

  /// How many of the paused uploads' soft reservations an upload of `size` needs released to be
  /// admitted, `softPending` being what each reserves in the order they give way
  /// (`ResumeTable.softReservations`): the fewest from the front that let it fit in `freeBytes`
  /// beside what the uploads in flight still have to write, the firm reservations (`held`) and
  /// the soft ones left.
  ///
  /// 0 when it fits beside them all; also when it would not fit with every one released (it is
  /// refused, and nothing gives way for nothing), and when `freeBytes` is `nil`: reservations
  /// give way only to a fresh measurement, which `admit` asks for when the last one does not
  /// clearly leave room. What uploads in flight have yet to write never gives way.
  func reservationsToRelease(
    size: Int, freeBytes: Int?, held: Int = 0, softPending: [Int]
  ) -> Int {
    guard let available = room(freeBytes: freeBytes, held: held), fits(size, in: available)
    else { return 0 }
    // What the reservations from each index on add up to (at most `Int.max`); the last is 0.
    var kept = [Int](repeating: 0, count: softPending.count + 1)
    for index in softPending.indices.reversed() {
      kept[index] = kept[index + 1].addingSaturated(softPending[index])
    }
    return kept.firstIndex { reservation in
      let (room, overflow) = available.subtractingReportingOverflow(reservation)
      return !overflow && fits(size, in: room)
    } ?? 0
  }

  /// Whether an upload of `size` would fit in `freeBytes` beside what the uploads in flight
  /// still have to write and `held` more (the firm reservations): with every soft one released.
  /// `false` without a measurement.
  func fits(_ size: Int, freeBytes: Int?, held: Int) -> Bool {
    guard let available = room(freeBytes: freeBytes, held: held) else { return false }
    return fits(size, in: available)
  }

  /// What `freeBytes` leaves beside the uploads in flight and `held`; `nil` without a
  /// measurement, or when that is below what an `Int` holds.
  private func room(freeBytes: Int?, held: Int) -> Int? {
    guard let freeBytes else { return nil }
    let available = freeBytes.subtractingReportingOverflow(inFlightRemaining.addingSaturated(held))
    return available.overflow ? nil : available.partialValue
  }

  /// What the uploads in flight still have to write.
  private var inFlightRemaining: Int {
    inFlight.values.reduce(0) { $0 + max(0, $1.upload.size - $1.counter.bytes) }
  }

  /// Whether `size` bytes leave at least `reservedFreeSpace` of `available`. Either can be as
  /// large as an `Int` holds (a 19-digit Content-Length, a reserve of `Int.max`): compared
  /// without overflowing.
  private func fits(_ size: Int, in available: Int) -> Bool {
    let (room, overflow) = available.subtractingReportingOverflow(reservedFreeSpace)
    return !overflow && size <= room
  }

  /// Ends an upload, stored or not. Returns `false` when it was not in flight (already ended).
  @discardableResult
  mutating func end(_ id: UInt64) -> Bool {
    inFlight.removeValue(forKey: id) != nil
  }

  /// The progress task's next step: the uploads in flight in the order they started, or the
  /// end of publishing when there are none (a later upload starts a new task).
  mutating func nextProgressStep() -> ProgressStep {
    guard !inFlight.isEmpty else {
      publishingProgress = false
      return .finish
    }
    return .publish(
      inFlight.values
        .sorted { $0.upload.id < $1.upload.id }
        .map { UploadProgress(upload: $0.upload, receivedBytes: $0.counter.bytes) })
  }

  /// The progress task stopped early (the session ended); a later upload starts a new one.
  mutating func progressStopped() { publishingProgress = false }
}

/// The last `statvfs` of the staging volume, so most uploads are admitted without a system call:
/// within `lifetime` of a measurement, every byte admitted since is counted as already written,
/// which can only underestimate what is free. When that estimate is not clearly enough, the
/// connection measures again.
struct FreeSpaceEstimate {
  static let lifetime = Duration.milliseconds(250)

  private var measured: Int?
  private var measuredAt = Duration.zero
  private var admittedSince = 0

  mutating func record(_ freeBytes: Int, at now: Duration) {
    measured = freeBytes
    measuredAt = now
    admittedSince = 0
  }

  mutating func admitted(_ size: Int) { admittedSince += size }

  func pessimisticEstimate(at now: Duration) -> Int? {
    guard let measured, now - measuredAt < Self.lifetime else { return nil }
    return measured - admittedSince
  }
}

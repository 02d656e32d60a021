import BrowserDropSystem
import FoundationEssentials
import Glibc

/// The resumable extension's side of the server: where an upload stands (`HEAD`), admitting a
/// POST with an id or a PATCH, pausing, expiry and lock preemption. The rules are
/// `ResumeTable`'s; this side waits, sends the events and removes expired files.
extension BrowserDropServer {
  /// Where upload `id` of `path` stands (`HEAD`): durable offset and length. A request still
  /// holding it is released first and its bytes kept.
  func standing(
    of id: UploadID, path: UploadPath
  ) async -> Result<(offset: Int, length: Int), Refusal> {
    expirePaused()
    // An expired upload's files are gone once HEAD says it is unknown.
    await storeSettled(id)
    while true {
      switch resumeTable.standing(id, path: path) {
      case .unknown: return .failure(Refusal(.unknownUpload))
      case .otherPath:
        return .failure(Refusal(.uploadMismatch, "That upload id belongs to another path."))
      case .complete(let length): return .success((length, length))
      case .paused(let offset, let length): return .success((offset, length))
      case .held: await takeOver(id)
      }
    }
  }

  /// Remembers that `request`, naming an upload id, was refused before its body
  /// (`RecentRefusals`).
  func rememberRefusal(_ refusal: Refusal, of request: RequestPolicy.UploadRequest) {
    switch request.resumable {
    case .start(let id), .resume(let id, _):
      recentRefusals.record(id, path: request.path, error: refusal.error)
    case .probe, nil: break
    }
  }

  /// The refusal remembered for upload `id` of `path`, taken (its `HEAD` tells it once).
  func takeRefusal(of id: UploadID, path: UploadPath) -> ProtocolError? {
    recentRefusals.take(id, path: path)
  }

  /// Whether what paused upload `id` of `path` still has to send after `offset` fits in
  /// `freeBytes` (a fresh measurement) now, as its PATCH's admission would count it: beside the
  /// uploads in flight, the other paused uploads' firm reservations (soft ones would give way)
  /// and `reservedFreeSpace`. True when it no longer stands paused at `offset` (another request
  /// took it up meanwhile: its bytes in flight are its own).
  func restFits(of id: UploadID, path: UploadPath, offset: Int, freeBytes: Int) -> Bool {
    guard case .paused(offset, let length) = resumeTable.standing(id, path: path) else {
      return true
    }
    return admission.fits(
      length - offset, freeBytes: freeBytes,
      held: resumeTable.firmRemaining(excluding: id, now: clock.now))
  }

  /// Decides a resumable POST or PATCH; `hold` becomes the request's hold on the upload.
  func admitResumable(
    _ request: RequestPolicy.UploadRequest, hold: UploadHold, freeBytes: Int?
  ) async -> Admission {
    expirePaused()
    guard let store = resumableStore else {
      return admit(request.path, size: request.size, freeBytes: freeBytes)
    }
    // Files of the id that the store is still removing go first: a new upload never meets them.
    switch request.resumable {
    case .start(let id), .resume(let id, _): await storeSettled(id)
    case .probe, nil: break
    }
    switch request.resumable {
    case .start(let id):
      // A request holding it stops first; it may store the file while this one waits.
      while resumeTable.hold(of: id) != nil { await takeOver(id) }
      // Stored already (its 201 lost, perhaps with the process that stored it): not again.
      if let refusal = resumeTable.checkStart(id, path: request.path) { return .refused(refusal) }
      let decision = admitReleasing(
        request.path, size: request.size, freeBytes: freeBytes, excluding: id)
      guard case .accepted(var ticket) = decision else { return decision }
      if let replaced = resumeTable.start(
        id, path: request.path, length: request.size, upload: ticket.upload, hold: hold)
      {
        // The client started that upload again from the start: the earlier one ends here.
        eventSink.yield(.uploadFailed(replaced, .cancelled))
      }
      ticket.resumable = ResumableTicket(id: id, store: store, offset: 0, hold: hold)
      recentRefusals.forget(id)
      return .accepted(ticket)
    case .resume(let id, let offset):
      var snapshot: ResumeTable.Entry.Snapshot
      while true {
        switch resumeTable.checkResume(id, path: request.path, offset: offset, size: request.size) {
        case .held:
          await takeOver(id)
          continue
        case .refuse(let refusal): return .refused(refusal)
        case .proceed(let found): snapshot = found
        }
        break
      }
      let decision = admitReleasing(
        request.path, size: request.size, freeBytes: freeBytes, excluding: id,
        continuing: UploadAdmission.Continuation(
          upload: snapshot.upload, length: snapshot.length, offset: snapshot.offset))
      if case .refused(let refusal) = decision, refusal.error == .insufficientStorage {
        // Its bytes stay: the client can try again later from where it stands.
        var short = Refusal(
          .insufficientStorage,
          "Not enough free space on the device for the rest of the upload; "
            + "the \(snapshot.offset) bytes already sent are kept.")
        short.uploadOffset = snapshot.offset
        short.uploadLength = snapshot.length
        return .refused(short)
      }
      guard case .accepted(var ticket) = decision else { return decision }
      resumeTable.resume(id, upload: ticket.upload, hold: hold)
      pauseSink.yield(.resumed(ticket.upload, offset: snapshot.offset))
      ticket.resumable = ResumableTicket(id: id, store: store, offset: snapshot.offset, hold: hold)
      recentRefusals.forget(id)
      return .accepted(ticket)
    case .probe, nil:
      return admitReleasing(request.path, size: request.size, freeBytes: freeBytes)
    }
  }

  /// `admit`, counting the paused uploads' reservations (all but `id`'s) against free space.
  /// Firm ones (`ResumeTable.firmReservation` after a paused upload's last byte) always count;
  /// when the upload fits only without some soft ones, the fewest in the order they give way
  /// (`ResumeTable.softReservations`, `UploadAdmission.reservationsToRelease`) are left out,
  /// and released once it is admitted. Those uploads keep their bytes and ids; refused,
  /// nothing is released.
  private func admitReleasing(
    _ path: UploadPath, size: Int, freeBytes: Int?, excluding id: UploadID? = nil,
    continuing: UploadAdmission.Continuation? = nil
  ) -> Admission {
    let reserved = resumeTable.pausedRemaining(excluding: id)
    let decision = admit(
      path, size: size, freeBytes: freeBytes, alsoPending: reserved, continuing: continuing)
    // Only an upload refused for space on a fresh measurement looks further: the paused
    // uploads, in the order they give way (sorted here only, not on every admission).
    guard case .refused(let refusal) = decision, refusal.error == .insufficientStorage,
      freeBytes != nil, reserved > 0
    else { return decision }
    let now = clock.now
    let firm = resumeTable.firmRemaining(excluding: id, now: now)
    // Nothing to gain when it would not fit with every soft reservation gone: no sort then.
    guard admission.fits(size, freeBytes: freeBytes, held: firm) else { return decision }
    let reservations = resumeTable.softReservations(excluding: id, now: now)
    let released = admission.reservationsToRelease(
      size: size, freeBytes: freeBytes, held: firm, softPending: reservations.map(\.bytes))
    guard released > 0 else { return decision }
    let retried = admit(
      path, size: size, freeBytes: freeBytes,
      alsoPending: firm.addingSaturated(ResumeTable.total(reservations.dropFirst(released))),
      continuing: continuing)
    if case .accepted = retried {
      resumeTable.releaseReservations(reservations.prefix(released).map(\.id))
    }
    return retried
  }

  /// A resumable upload's request stopped with `keptBytes` on the disk: paused, not ended.
  func pause(_ ticket: UploadTicket, keptBytes: Int) {
    guard let resumable = ticket.resumable, admission.isInFlight(ticket.upload.id) else { return }
    admission.end(ticket.upload.id)
    let lifetime = configuration.resumableUploads?.expiresAfter ?? .zero
    resumeTable.pause(
      resumable.id, hold: resumable.hold, offset: keptBytes, expiresAt: clock.now + lifetime,
      firmUntil: clock.now + ResumeTable.firmReservation)
    pauseSink.yield(.paused(ticket.upload, keptBytes: keptBytes))
    holdEnded(resumable.id)
  }

  /// Releases the request holding `id` and waits until it has stopped.
  private func takeOver(_ id: UploadID) async {
    guard let hold = resumeTable.hold(of: id) else { return }
    hold.release()
    await withCheckedContinuation { holdWaiters[id, default: []].append($0) }
  }

  /// The hold on `id` ended (paused, stored or failed): requests waiting for it go on.
  func holdEnded(_ id: UploadID) {
    for waiter in holdWaiters.removeValue(forKey: id) ?? [] { waiter.resume() }
  }

  /// Forgets the paused uploads whose time is up: their files go, and one this session started
  /// ends with `.uploadFailed(…, .timedOut)`. Stored uploads whose time is up are forgotten
  /// too (their records go). The files go on the blocking pool (`onStore`).
  func expirePaused() {
    guard resumableStore != nil else { return }
    let paused = resumeTable.expire(now: clock.now)
    for (_, entry) in paused {
      if let upload = entry.upload { eventSink.yield(.uploadFailed(upload, .timedOut)) }
    }
    let completed = resumeTable.expireCompleted(now: clock.now)
    for id in completed { storedHere.remove(id) }
    guard !paused.isEmpty || !completed.isEmpty else { return }
    let ids = paused.map(\.0)
    onStore(ids + completed) { store in
      for id in ids { store.remove(id) }
      for id in completed { store.removeRecord(id) }
    }
  }

  /// Runs `job`, which touches the files of `ids`, on the store, on the blocking pool (the actor
  /// runs on the event loop's thread, which must not wait for the disk), after the jobs given
  /// before it: one at a time, in order.
  func onStore(_ ids: [UploadID], _ job: @escaping @Sendable (ResumableStore) -> Void) {
    guard let store = resumableStore else { return }
    let previous = storeWork
    for id in ids { pendingStoreIDs[id, default: 0] += 1 }
    storeWork = Task {
      await previous?.value
      await BlockingPool.shared.run { job(store) }
      for id in ids {
        self.pendingStoreIDs[id, default: 1] -= 1
        if self.pendingStoreIDs[id] == 0 { self.pendingStoreIDs[id] = nil }
      }
    }
  }

  /// Returns once every job given to `onStore` so far has run.
  func storeSettled() async {
    if let work = storeWork { await work.value }
  }

  /// Returns once the jobs given to `onStore` for `id` have run (the jobs before them too).
  func storeSettled(_ id: UploadID) async {
    if pendingStoreIDs[id] != nil, let work = storeWork { await work.value }
  }

  /// The resumable upload `resumable` was stored (its file renamed into the session folder):
  /// remembered as complete until it expires. With the `.stagingRoot` scope its record stays
  /// on the disk, without its partial file, which is what says "stored" (`ResumableStore`), so
  /// a client that lost the 201 learns from `HEAD` that it arrived, after a restart as well.
  ///
  /// Its record is marked with the time it was stored (`ResumableStore.markStored`), so a later
  /// session remembers it for `expiresAfter` from now, not from when its upload began.
  func completeResumable(_ resumable: ResumableTicket) {
    let lifetime = configuration.resumableUploads?.expiresAfter ?? .zero
    let id = resumable.id
    let remembers = resumable.store.remembersStored
    let forgotten = resumeTable.complete(id, expiresAt: clock.now + lifetime)
    if remembers { storedHere.insert(id) }
    if let forgotten { storedHere.remove(forgotten) }
    onStore([id] + (forgotten.map { [$0] } ?? [])) { store in
      if remembers { store.markStored(id) } else { store.removeRecord(id) }
      if let forgotten { store.removeRecord(forgotten) }
    }
    holdEnded(id)
    ResumeCrashPoint.reach(.stored)
  }

  /// The session is ending: every upload it started that is paused ends with
  /// `.uploadFailed(…, .cancelled)`. With the `.stagingRoot` scope the files stay for the next
  /// session; with `.session` they go with the incoming folder.
  func endPausedUploads() {
    for (id, entry) in resumeTable.removeAll() {
      if let upload = entry.upload, entry.hold == nil {
        eventSink.yield(.uploadFailed(upload, .cancelled))
      }
      holdEnded(id)
    }
    pauseSink.finish()
  }

  /// Fills the table from the store at start (the `.stagingRoot` scope): uploads cut off by an
  /// earlier session or process, and uploads they stored, with the time they have left.
  func adoptRecovered(_ recovered: [(UploadID, ResumableStore.Record)]) {
    guard let lifetime = configuration.resumableUploads?.expiresAfter else { return }
    let now = Date().timeIntervalSince1970
    var invalid: [UploadID] = []
    var forgottenIDs: [UploadID] = []
    defer {
      if !invalid.isEmpty || !forgottenIDs.isEmpty {
        onStore(invalid + forgottenIDs) { [invalid, forgottenIDs] store in
          for id in invalid { store.remove(id) }
          for id in forgottenIDs { store.removeRecord(id) }
        }
      }
    }
    // Oldest first: stored ones are remembered in the order they expire.
    for (id, record) in recovered.sorted(by: { $0.1.updated < $1.1.updated }) {
      guard let path = try? UploadPath(validating: record.path) else {
        invalid.append(id)
        continue
      }
      let age = Duration.milliseconds(Int64(max(0, now - record.updated) * 1000))
      let expiresAt = clock.now + lifetime - age
      if record.stored {
        if let forgotten = resumeTable.recoveredComplete(
          id, path: path, length: record.length, expiresAt: expiresAt)
        {
          forgottenIDs.append(forgotten)
        }
      } else {
        // Firm for what is left of `firmReservation` since its last byte (`updated`), as if
        // this session had seen the pause: a kiosk takes paused uploads up at every batch.
        resumeTable.recovered(
          id, path: path, length: record.length, offset: record.offset, expiresAt: expiresAt,
          firmUntil: clock.now + ResumeTable.firmReservation - age)
      }
    }
  }
}

import BrowserDropSystem
import FoundationEssentials

/// What connections ask the server: admit an upload, store it, or record that it failed. The
/// rules are `UploadAdmission`'s; this side sends the events and runs the progress task.
extension BrowserDropServer {
  /// What `admit` decided.
  enum Admission: Sendable {
    case accepted(UploadTicket)
    case refused(Refusal)
    /// The free-space figure is too old to decide with: measure (`statvfs`) and ask again.
    case measureFreeSpace
    /// The session is handing its listener over (`finishHandingOverListener`): park the
    /// connection for the next session, which decides.
    case handOver
  }

  /// Decides whether an upload may start: name conflicts, then free space (counting what uploads
  /// in flight still have to write). On success the upload is in flight and `.uploadStarted`
  /// has been sent.
  ///
  /// `freeBytes` is a fresh measurement, or `nil` to decide from the last one when that is
  /// recent and the answer is clear even counting every byte admitted since as written;
  /// otherwise the answer is `.measureFreeSpace`.
  ///
  /// `alsoPending` and `continuing` are the resumable extension's (`UploadAdmission.admit`); a
  /// continued upload this session already announced gets no second `.uploadStarted`.
  func admit(
    _ path: UploadPath, size: Int, freeBytes: Int?, alsoPending: Int = 0,
    continuing: UploadAdmission.Continuation? = nil
  ) -> Admission {
    switch state {
    case .listening: break
    case .finishing: return .handOver
    case .idle, .starting, .suspended, .ended:
      return .refused(Refusal(.writeFailed, "The session is not accepting uploads."))
    }
    switch admission.admit(
      path, size: size, freeBytes: freeBytes, conflict: index.conflict(for: path), now: clock.now,
      alsoPending: alsoPending, continuing: continuing)
    {
    case .accept(let ticket, let startPublishingProgress):
      if continuing?.upload == nil { eventSink.yield(.uploadStarted(ticket.upload)) }
      if startPublishingProgress { publishProgress() }
      return .accepted(ticket)
    case .refuse(let refusal):
      return .refused(refusal)
    case .measureFreeSpace:
      return .measureFreeSpace
    }
  }

  /// Stores a complete upload: checks the name again, moves the file into place and records it.
  /// Returns the record and where its name went (the folders to flush for durability).
  func store(
    _ ticket: UploadTicket, partial: PartialFile, mimeType: String?, kind: ContentKind
  ) -> Result<(ReceivedFile, StagingFolder.Placement), Refusal> {
    guard let session = state.session, admission.isInFlight(ticket.upload.id) else {
      return .failure(Refusal(.writeFailed, "The session ended while the file was arriving."))
    }
    if let conflict = index.conflict(for: ticket.path) {
      endUpload(ticket, failure: .pathConflict)
      return .failure(conflict)
    }
    let placement: StagingFolder.Placement
    if ticket.resumable != nil { ResumeCrashPoint.reach(.received) }
    do {
      // With durability on, a folder made here is known to be unflushed before any other upload
      // can use it (`FolderSync.flush`), even when this upload then fails.
      let folderSync = session.services.configuration.durability ? session.services.folderSync : nil
      placement = try staging.place(
        partial: partial, at: ticket.path, sessionFD: session.sessionFD,
        made: { folderSync?.noteMade($0) })
    } catch {
      endUpload(ticket, failure: .writeFailed(error.reason))
      return .failure(Refusal(.writeFailed, "The file couldn't be stored: \(error.reason)."))
    }
    let file = ReceivedFile(
      relativePath: ticket.path.value, size: ticket.upload.size,
      sessionFolder: staging.session, receivedAt: Date(), mimeType: mimeType, kind: kind)
    index.insert(file, at: ticket.path)
    // Its id is remembered as complete, so a client that lost the 201 learns it from HEAD; with
    // durability on, only once the name is flushed (the connection calls `completeResumable`
    // then): until that, HEAD and PATCH of the id wait, as for any request holding it.
    if let resumable = ticket.resumable, !session.services.configuration.durability {
      completeResumable(resumable)
    }
    endUpload(ticket, failure: nil)
    eventSink.yield(.uploadFinished(file))
    return .success((file, placement))
  }

  /// Ends an upload that did not complete: `.uploadFailed` with the reason.
  func abandon(_ ticket: UploadTicket, reason: FailureReason) {
    guard admission.isInFlight(ticket.upload.id) else { return }
    endUpload(ticket, failure: reason)
  }

  private func endUpload(_ ticket: UploadTicket, failure: FailureReason?) {
    admission.end(ticket.upload.id)
    if failure != nil, let resumable = ticket.resumable {
      resumeTable.remove(resumable.id)
      holdEnded(resumable.id)
    }
    if let failure { eventSink.yield(.uploadFailed(ticket.upload, failure)) }
  }

  /// Publishes the uploads in flight every `UploadAdmission.progressInterval` until none are
  /// left, then the empty list.
  private func publishProgress() {
    let task = Task { [weak self] in _ = await self?.runProgress() }
    state.updateSession { $0.progressTask = task }
  }

  private func runProgress() async {
    while case .publish(let list) = admission.nextProgressStep() {
      progressSink.yield(list)
      do {
        try await clock.sleep(for: UploadAdmission.progressInterval)
      } catch {
        admission.progressStopped()
        break
      }
    }
    progressSink.yield([])
    state.updateSession { $0.progressTask = nil }
  }
}

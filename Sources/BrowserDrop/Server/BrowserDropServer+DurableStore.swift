import BrowserDropSystem

/// Storing a durable upload: the actor decides its name (`reserve`), an I/O thread makes its
/// data, name and folder durable in one trip (`UploadReceiver+Durable.swift`), and the actor
/// then lists and announces it (`completeDurable`) or frees the name (`releaseReservation`).
/// So the listing and the events follow the flushes' outcome: nothing is listed or announced
/// before its 201 may be sent, and an upload whose flush failed is reported once, as failed.
extension BrowserDropServer {
  /// What `reserve` decided.
  enum Reservation: Sendable {
    /// The name is the upload's until `completeDurable` or `releaseReservation`; its folder is
    /// made where missing and open.
    case reserved(StagingFolder.Destination)
    /// It can't be stored: answer `refusal`, ending the upload with `reason` (`nil` when the
    /// session ended: nothing to report, as `store`).
    case refused(Refusal, FailureReason?)
  }

  /// Checks the name again and reserves it for a complete durable upload: opens its folder,
  /// making missing ones (each noted unflushed with the `mkdir`, `FolderSync.noteMade`). An
  /// upload of the same path still flushing is waited for first.
  func reserve(_ ticket: UploadTicket) async -> Reservation {
    while true {
      guard let session = state.session, admission.isInFlight(ticket.upload.id) else {
        return .refused(
          Refusal(.writeFailed, "The session ended while the file was arriving."), nil)
      }
      guard !reservations.holds(ticket.path) else {
        await withCheckedContinuation { reservations.wait(for: ticket.path, $0) }
        continue
      }
      if let conflict = index.conflict(for: ticket.path) ?? reservations.conflict(for: ticket.path)
      {
        return .refused(conflict, .pathConflict)
      }
      let folderSync = session.services.folderSync
      do throws(SystemError) {
        let destination = try staging.prepare(
          at: ticket.path, sessionFD: session.sessionFD, made: { folderSync.noteMade($0) })
        reservations.reserve(ticket.path)
        return .reserved(destination)
      } catch {
        return .refused(
          Refusal(.writeFailed, "The file couldn't be stored: \(error.reason)."),
          .writeFailed(error.reason))
      }
    }
  }

  /// A reserved upload's data, name and folders are on the device: it is listed and reported
  /// finished, and its 201 may go.
  func completeDurable(_ ticket: UploadTicket, mimeType: String?, kind: ContentKind) {
    release(ticket.path)
    recordStored(ticket, mimeType: mimeType, kind: kind)
  }

  /// A reserved upload failed (its connection then reports it, `abandon`): the name is free
  /// again. `nameRemoved` when its name had been made and was removed again because a folder
  /// flush failed: an earlier file of the path, which it replaced on the disk, is gone with it
  /// and no longer listed.
  func releaseReservation(_ ticket: UploadTicket, nameRemoved: Bool) {
    release(ticket.path)
    if nameRemoved { _ = index.remove(ticket.path.value) }
  }

  private func release(_ path: UploadPath) {
    for waiter in reservations.release(path) { waiter.resume() }
  }
}

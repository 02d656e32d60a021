import BrowserDropSystem

/// Between receiving the last byte of a resumable upload and storing it.
extension UploadReceiver {
  /// Step 2 of storing a resumable upload (see `ResumableStore`): every byte is written (and,
  /// with durability on, flushed); before the file is renamed into the session folder, its
  /// record is replaced by one that says "stored", durably when the session is durable. Only
  /// the `.stagingRoot` scope writes it: a `.session` store ends with its session.
  func markStored(
    _ resumable: ResumableTicket, _ record: ResumableStore.Record
  ) async throws(BodyFailure) {
    let store = resumable.store
    guard store.remembersStored else {
      ResumeCrashPoint.reach(.received)
      return
    }
    let id = resumable.id
    let durably = services.configuration.durability
    let marking = await BlockingPool.shared.run { () -> Result<Void, SystemError> in
      ResumeCrashPoint.reach(.received)
      return Result { () throws(SystemError) in
        try store.markStored(id, record, durably: durably)
      }
    }
    if case .failure(let error) = marking {
      throw BodyFailure(
        reason: .writeFailed(error.reason),
        refusal: Refusal(.writeFailed, "The upload couldn't be recorded: \(error.reason)."))
    }
    ResumeCrashPoint.reach(.completing)
  }
}

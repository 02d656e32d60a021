import BrowserDropSystem
import Glibc

/// Steps 3 and 4 with durability on: the server decides the name first (`reserve`), then one
/// trip to an I/O thread flushes the data, inspects a body too short to have been inspected
/// while it arrived, gives the file its name and joins the grouped flush of its folders
/// (`FolderSync.join`), and the server lists it only once all of that is on the device.
///
/// Two trips (the data flush, then the folder flush round) cost 11–14 voluntary context switches
/// per small file against about one without durability; one trip halves the hops (see
/// docs/performance.md for the figures).
extension UploadReceiver {
  /// What the trip to the I/O threads did.
  private enum Durability: Sendable {
    /// Data, name and folders are flushed.
    case stored(ContentInspector.Finding)
    /// Inspection refused the content; nothing was named.
    case refused(String)
    /// The data flush failed; nothing was named.
    case dataFailed(SystemError)
    /// The name could not be given.
    case namingFailed(SystemError)
    /// A folder flush failed: the name was removed again.
    case folderFailed
  }

  /// Stores the complete file durably and returns the response (a refusal when the name was
  /// taken meanwhile). Sets `installed` once the file is stored.
  ///
  /// When a folder flush fails after the name was made, the name is removed again (on the I/O
  /// thread, before the server hears of it): the upload fails with 500 `write_failed`, nothing
  /// of it is listed, announced as finished or handed over, and its bytes go with the partial
  /// file. An earlier file of the same path, which the name had replaced, is gone with it.
  func storeDurably(
    _ partial: PartialFile, alreadyFound: ContentInspector.Finding?, installed: inout Bool
  ) async throws(BodyFailure) -> [UInt8] {
    guard let server = services.server else { throw .cancelled }
    let destination: StagingFolder.Destination
    switch await server.reserve(ticket) {
    case .reserved(let reserved):
      destination = reserved
    case .refused(let refusal, let reason):
      // In the order of the path without durability: the inspection still due may refuse the
      // content first, then a cancelled upload stops (a resumable one is kept).
      let found = try await finishWriting(
        partial.fd, alreadyFound: alreadyFound, wroteItAll: false)
      if let refused = found.refusal { throw .refusedContent(refused) }
      if Task.isCancelled { throw .cancelled }
      if let reason { await server.abandon(ticket, reason: reason) }
      return Response.refusal(refusal)
    }
    switch await makeDurable(partial, at: destination, alreadyFound: alreadyFound) {
    case .stored(let found):
      installed = true
      await server.completeDurable(ticket, mimeType: found.mimeType, kind: found.kind)
      return Response.created(path: ticket.path.value)
    case .refused(let message):
      await server.releaseReservation(ticket, nameRemoved: false)
      throw .refusedContent(message)
    case .dataFailed(let error):
      await server.releaseReservation(ticket, nameRemoved: false)
      throw .flushing(error)
    case .namingFailed(let error):
      await server.releaseReservation(ticket, nameRemoved: false)
      throw BodyFailure(
        reason: .writeFailed(error.reason),
        refusal: Refusal(.writeFailed, "The file couldn't be stored: \(error.reason)."))
    case .folderFailed:
      await server.releaseReservation(ticket, nameRemoved: true)
      throw BodyFailure(
        reason: .writeFailed("the disk reported an error while its folder was flushed"),
        refusal: Refusal(
          .writeFailed, "The disk reported an error while the file was made durable."))
    }
  }

  /// The one trip: data, inspection, name, folders, in that order. The continuation is resumed
  /// by this upload's I/O thread, or by the one running the folder flush that covers it.
  private func makeDurable(
    _ partial: PartialFile, at destination: StagingFolder.Destination,
    alreadyFound: ContentInspector.Finding?
  ) async -> Durability {
    let folderSync = services.folderSync
    let sessionPath = services.staging.sessionPath
    let syncData = folderSync.operations(for: sessionPath).syncData
    let inspector = services.contentInspector
    let fileExtension = ticket.path.fileExtension
    let label = ticket.path.value
    let resumable = ticket.resumable != nil
    return await withCheckedContinuation { continuation in
      BlockingPool.shared.submit {
        @Sendable func end(_ outcome: Durability) {
          destination.close()
          continuation.resume(returning: outcome)
        }
        if let failure = syncData(partial.fd, label) { return end(.dataFailed(failure)) }
        let found = alreadyFound ?? inspector.inspect(fd: partial.fd, fileExtension: fileExtension)
        if let refusal = found.refusal { return end(.refused(refusal)) }
        if resumable { ResumeCrashPoint.reach(.received) }
        do throws(SystemError) {
          try destination.install(partial)
        } catch {
          return end(.namingFailed(error))
        }
        if resumable { ResumeCrashPoint.reach(.stored) }
        folderSync.join(destination.placement, under: sessionPath) { flushed in
          if !flushed { destination.removeName() }
          end(flushed ? .stored(found) : .folderFailed)
        }
      }
    }
  }
}

import BrowserDropSystem
import Glibc

/// Receives one admitted upload, in four steps a reader can follow:
/// 1. `100 Continue` when the client waits for it,
/// 2. the body streamed into a partial file, its first bytes inspected meanwhile
///    (`UploadReceiver+Streaming.swift`),
/// 3. the file made durable, and inspected if the body was too short to be inspected while it
///    arrived (`finishWriting`),
/// 4. the server asked to store it under its name (`store`).
struct UploadReceiver {
  let socket: Socket
  let services: SessionServices
  let ticket: UploadTicket

  var idleTimeout: IdleTimeout { services.idleTimeout }

  /// Receives the body (`leftover` holds its first bytes, read with the head) and returns the
  /// response to send (a refusal when the name was taken meanwhile), or the failure to report.
  func receive(
    expectsContinue: Bool, leftover: UnsafeRawBufferPointer
  ) async -> Result<[UInt8], BodyFailure> {
    do throws(BodyFailure) {
      let sendsContinue = expectsContinue && leftover.isEmpty
      if let resumable = ticket.resumable {
        return .success(try await receiveKept(resumable, leftover, sendsContinue: sendsContinue))
      }
      if sendsContinue { try await sendContinue() }
      let partial: PartialFile
      do throws(SystemError) {
        partial = try PartialFile.create(
          in: services.staging.incomingPath, id: ticket.upload.id, kind: services.partialKind)
      } catch {
        throw .creating(error)
      }
      var installed = false
      defer {
        if !installed { partial.removeName() }
        close(partial.fd)
      }
      let inspected = try await streamBody(into: partial.fd, leftover: leftover)
      let found = try await finishWriting(partial.fd, alreadyFound: inspected, wroteItAll: true)
      if let refusal = found.refusal { throw .refusedContent(refusal) }
      if Task.isCancelled { throw .cancelled }
      return .success(try await store(partial, found: found, installed: &installed))
    } catch {
      return .failure(error)
    }
  }

  /// A resumable upload (all of it or the rest): the partial file lives in the resumable store
  /// under the upload's id, and a cut-off body is made durable and kept there (`keptOffset`)
  /// instead of removed. Another request taking the upload over (`UploadHold.release`) cancels
  /// the transfer, which then stops like a lost connection. The `100 Continue` (when
  /// `sendsContinue`) goes once the file is open, so a connection lost before it pauses the
  /// upload where it stood, like any other cut, rather than ending it.
  private func receiveKept(
    _ resumable: ResumableTicket, _ leftover: UnsafeRawBufferPointer, sendsContinue: Bool
  ) async throws(BodyFailure) -> [UInt8] {
    let record = resumable.record(path: ticket.path, length: ticket.upload.size)
    let fd: Int32
    do throws(SystemError) {
      fd =
        resumable.offset == 0
        ? try resumable.store.create(resumable.id, record)
        : try resumable.store.reopen(resumable.id, at: resumable.offset)
    } catch {
      throw .creating(error)
    }
    let partial = PartialFile(fd: fd, path: resumable.store.partialPath(resumable.id))
    var installed = false
    var kept = false
    defer {
      if !installed && !kept { resumable.store.remove(resumable.id) }
      close(fd)
    }
    do throws(BodyFailure) {
      if sendsContinue { try await sendContinue() }
      let inspected = try await streamBody(
        into: fd, leftover: leftover, from: resumable.offset, until: resumable.hold,
        checkpoint: Self.checkpoint(resumable, fd: fd, record: record))
      // A resumed upload's first bytes may come from an earlier request (or run of the
      // process), so they may have left the page cache: no sniff on this thread then.
      let found = try await finishWriting(
        fd, alreadyFound: inspected, wroteItAll: resumable.offset == 0)
      if let refusal = found.refusal { throw .refusedContent(refusal) }
      if Task.isCancelled { throw .cancelled }
      return try await store(partial, found: found, installed: &installed)
    } catch  where error.isResumable && ticket.upload.size > 0 {
      // An empty upload keeps nothing: its offset would equal its length, which `HEAD`
      // reports as stored.
      let store = resumable.store
      let id = resumable.id
      let keeping = await BlockingPool.shared.run { () -> Result<Int, SystemError> in
        Result { () throws(SystemError) in try store.keep(fd: fd, id, record) }
      }
      switch keeping {
      case .success(let offset):
        kept = true
        var paused = error
        paused.keptOffset = offset
        throw paused
      case .failure(let failure):
        throw .flushing(failure)
      }
    }
  }

  /// The periodic flush and record of a kept upload, for a store that outlives the process.
  private static func checkpoint(
    _ resumable: ResumableTicket, fd: Int32, record: ResumableStore.Record
  ) -> (@Sendable () -> Void)? {
    guard resumable.store.remembersStored else { return nil }
    let (store, id) = (resumable.store, resumable.id)
    // A failed flush here costs nothing: the pause or the store flushes again and reports it.
    return { _ = try? store.checkpoint(fd: fd, id, record) }
  }

  private func sendContinue() async throws(BodyFailure) {
    do {
      try await socket.write(Response.continueBytes, deadline: idleTimeout.fromNow)
    } catch {
      throw .connectionLost
    }
  }

  /// The last byte is written: makes it durable, and finds out what a body that fitted in the
  /// sniffed prefix is, off the cooperative pool (on this thread only when `wroteItAll`, this
  /// request wrote the whole file, and a small magic database answers at once).
  private func finishWriting(
    _ fd: Int32, alreadyFound: ContentInspector.Finding?, wroteItAll: Bool
  ) async throws(BodyFailure) -> ContentInspector.Finding {
    let durable = services.configuration.durability
    let inspector = services.contentInspector
    let fileExtension = ticket.path.fileExtension
    // Uploads finishing together flush at once, each on its own I/O thread, so the device merges
    // their cache flushes (group commit, `FolderSync`); a failure fails this upload only.
    let syncData = services.folderSync.operations(for: services.staging.sessionPath).syncData
    let label = ticket.path.value
    let finish = { @Sendable () -> Result<ContentInspector.Finding, SystemError> in
      if durable, let failure = syncData(fd, label) { return .failure(failure) }
      return .success(alreadyFound ?? inspector.inspect(fd: fd, fileExtension: fileExtension))
    }
    // Nothing to flush, and the sniff (if any) answered at once: skip the hop to the I/O pool.
    if !durable, alreadyFound == nil, wroteItAll,
      let found = inspector.quickFinding(
        fd: fd, size: ticket.upload.size, fileExtension: fileExtension)
    {
      return found
    }
    let finishing =
      durable || (alreadyFound == nil && inspector.sniffs)
      ? await BlockingPool.shared.run(finish) : finish()
    switch finishing {
    case .success(let found): return found
    case .failure(let error): throw .flushing(error)
    }
  }

  /// Asks the server to place the file under its name; with durability on, waits for the
  /// folders whose entries changed to be flushed. Sets `installed` once the file has its name.
  private func store(
    _ partial: PartialFile, found: ContentInspector.Finding, installed: inout Bool
  ) async throws(BodyFailure) -> [UInt8] {
    guard let server = services.server else { throw .cancelled }
    switch await server.store(
      ticket, partial: partial, mimeType: found.mimeType, kind: found.kind)
    {
    case .success(let (_, placement)):
      installed = true
      if services.configuration.durability {
        let flushed = await services.folderSync.flush(
          placement, under: services.staging.sessionPath)
        // Complete for HEAD from now on; also when the flush failed: the file is in place, and
        // the client, told of the failure, asks HEAD before anything else.
        if let resumable = ticket.resumable { await server.completeResumable(resumable) }
        guard flushed else {
          return Response.refusal(
            Refusal(.writeFailed, "The disk reported an error while the file was made durable."))
        }
      }
      return Response.created(path: ticket.path.value)
    case .failure(let refusal):
      // `store` has already reported the failure; the partial file goes on the way out.
      return Response.refusal(refusal)
    }
  }
}

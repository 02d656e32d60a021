import BrowserDropSystem
import CBrowserDropLinux
import FoundationEssentials
import Glibc

/// One connection: one request, one response, then close.
struct Connection {
  let socket: Socket
  let services: SessionServices

  private static let headBufferSize = 64 * 1024

  private var idleTimeout: Duration { services.configuration.idleTimeout }

  /// Serves the one request and closes the socket on every path before returning, so the
  /// connection count the listener keeps never lags behind the descriptors actually open.
  func run() async {
    defer { socket.close() }
    let buffer = UnsafeMutableRawBufferPointer.allocate(
      byteCount: Self.headBufferSize, alignment: 16)
    defer { buffer.deallocate() }
    do {
      guard let (head, headEnd, filled) = try await readHead(into: buffer) else { return }
      let leftover = UnsafeRawBufferPointer(rebasing: buffer[headEnd..<filled])
      try await respond(to: head, leftover: leftover)
    } catch let refusal as Refusal {
      await refuse(refusal)
    } catch {
      // Timed out, cancelled or reset: close without a response.
    }
  }

  /// Reads until the blank line ending the head. `nil` when the peer closed first.
  private func readHead(
    into buffer: UnsafeMutableRawBufferPointer
  ) async throws
    -> (RequestHead, Int, Int)?
  {
    let deadline = ContinuousClock.now + idleTimeout
    var filled = 0
    while true {
      let count = try await socket.read(
        into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]), deadline: deadline)
      if count == 0 { return nil }
      let scanFrom = max(0, filled - 3)
      filled += count
      let bytes = UnsafeRawBufferPointer(rebasing: buffer[..<filled])
      if let end = RequestHead.end(in: bytes, scanFrom: scanFrom) {
        let head = UnsafeRawBufferPointer(rebasing: buffer[..<end])
        guard end <= RequestHead.maximumSize else {
          throw RequestHead.hostFirst(Refusal(.headersTooLarge), in: head)
        }
        do throws(Refusal) {
          return (try RequestHead.parse(head), end, filled)
        } catch {
          throw RequestHead.hostFirst(error, in: head)
        }
      }
      if filled > RequestHead.maximumSize {
        throw RequestHead.hostFirst(Refusal(.headersTooLarge), in: bytes)
      }
    }
  }

  /// Applies protocol v1's checks in their order and answers.
  private func respond(to head: RequestHead, leftover: UnsafeRawBufferPointer) async throws {
    guard let host = head.host, HostPolicy.isAllowed(host: host) else {
      throw Refusal.foreignHost
    }
    if head.hasTransferEncoding {
      throw head.contentLength == nil
        ? Refusal(.lengthRequired) : Refusal(.badRequest, "Content-Length with Transfer-Encoding.")
    }
    if head.method == "POST", head.contentLength == nil { throw Refusal(.lengthRequired) }
    let target = head.target
    let questionMark = target.firstIndex(of: "?")
    let path = questionMark.map { String(target[..<$0]) } ?? target
    let query = questionMark.map { target[target.index(after: $0)...] } ?? ""

    switch head.method {
    case "GET":
      let response =
        path == "/config.json" ? services.configResponse : await services.page.response(for: path)
      try await socket.write(response, deadline: ContinuousClock.now + idleTimeout)
      await closeGracefully()
    case "POST" where path == "/upload":
      if let origin = head.origin, !HostPolicy.originMatches(origin, host: host) {
        throw Refusal(.forbidden, "Uploads must come from this server's own page.")
      }
      try await receiveUpload(head: head, query: query, leftover: leftover)
    default:
      throw Refusal(.methodNotAllowed)
    }
  }

  private func receiveUpload(
    head: RequestHead, query: Substring, leftover: UnsafeRawBufferPointer
  )
    async throws
  {
    let size = head.contentLength ?? 0
    let path = try UploadPath(query: query)
    if let allowed = services.allowedExtensions, !allowed.contains(path.fileExtension) {
      throw Refusal(
        .unsupportedType,
        path.fileExtension.isEmpty
          ? "Files without an extension aren't accepted."
          : "Files of type .\(path.fileExtension) aren't accepted.")
    }
    if let maximum = services.configuration.maximumFileSize, size > maximum {
      throw Refusal(.tooLarge, "The file is \(size) bytes; the largest accepted is \(maximum).")
    }
    guard let server = services.server else { return }
    var admission = await server.admit(path, size: size, freeBytes: nil)
    if case .measureFreeSpace = admission {
      let stagingPath = services.staging.sessionPath
      let freeBytes = await BlockingPool.shared.run { () -> Int in
        var free: UInt64 = 0
        // An unreadable volume counts as full: better a 507 than a write that fails.
        return cbd_free_bytes(stagingPath, &free) == 0 ? Int(clamping: free) : 0
      }
      admission = await server.admit(path, size: size, freeBytes: freeBytes)
    }
    let ticket: UploadTicket
    switch admission {
    case .accepted(let accepted): ticket = accepted
    case .refused(let refusal): throw refusal
    case .measureFreeSpace: throw Refusal(.insufficientStorage)
    }
    let outcome = await receiveBody(
      of: ticket, expectsContinue: head.expectsContinue, leftover: leftover)
    switch outcome {
    case .success(let response):
      try? await socket.write(response, deadline: ContinuousClock.now + idleTimeout)
    case .failure(let failure):
      await server.abandon(ticket, reason: failure.reason)
      guard let refusal = failure.refusal else { return }
      if failure.unreadBody > 0 {
        await refuse(refusal, thenDiscard: failure.unreadBody)
      } else {
        await refuse(refusal)
      }
    }
  }

  private struct BodyFailure: Error {
    var reason: FailureReason
    /// What to answer, when the peer can still hear it.
    var refusal: Refusal?
    /// Body bytes the peer has yet to send: a refusal made while the body was arriving is
    /// answered at once, and the rest of the body is then read and thrown away, so that a
    /// client that sends everything before it reads still gets the answer.
    var unreadBody = 0
  }

  /// Streams the body into the partial file, inspects its first bytes while the rest arrives
  /// (refusing at once when the policy says so), makes it durable and asks the server to store
  /// it. Returns the response to send (a refusal when the name was taken meanwhile),
  /// or the failure to report.
  private func receiveBody(
    of ticket: UploadTicket, expectsContinue: Bool, leftover: UnsafeRawBufferPointer
  ) async -> Result<[UInt8], BodyFailure> {
    let configuration = services.configuration
    do {
      if expectsContinue && leftover.isEmpty {
        try await socket.write(Response.continueBytes, deadline: ContinuousClock.now + idleTimeout)
      }
    } catch {
      return .failure(BodyFailure(reason: .connectionLost))
    }
    let partial: PartialFile
    do {
      partial = try PartialFile.create(
        in: services.staging.incomingPath, id: ticket.upload.id, kind: services.partialKind)
    } catch {
      return .failure(
        BodyFailure(
          reason: .writeFailed(error.reason),
          refusal: Refusal(.writeFailed, "The file couldn't be created: \(error.reason).")))
    }
    let fd = partial.fd
    var installed = false
    defer {
      if !installed { partial.removeName() }
      close(fd)
    }

    let size = ticket.upload.size
    let inspector = services.contentInspector
    let fileExtension = ticket.path.fileExtension
    // Sniffed while the body streams in: once its first bytes (up to 64 KiB, or the whole body
    // when smaller) are in the file, libmagic reads them on the blocking pool while the rest
    // keeps arriving, and a refusal stops the transfer there.
    var finding: ContentInspector.Finding?
    do {
      var received = 0
      if !leftover.isEmpty {
        let part = UnsafeRawBufferPointer(rebasing: leftover[..<min(leftover.count, size)])
        try BodyTransfer.writeAll(fd, part)
        received = part.count
        ticket.counter.add(part.count)
      }
      var transfer = BodyTransfer(
        socket: socket, file: fd, idleTimeout: idleTimeout, counter: ticket.counter)
      transfer.writesBehind = configuration.durability
      let sniffedPrefix = inspector.sniffs ? min(size, ContentSniffer.prefixLength) : 0
      if received < sniffedPrefix {
        transfer.fileOffset = received
        guard try await transfer.move(sniffedPrefix - received) else {
          return .failure(BodyFailure(reason: .connectionLost))
        }
        received = sniffedPrefix
      }
      transfer.fileOffset = received
      let remaining = size - received
      if inspector.sniffs && remaining > 0 {
        switch try await Self.move(
          remaining, with: transfer, whileInspecting: inspector, fd: fd,
          fileExtension: fileExtension)
        {
        case .complete(let found):
          finding = found
        case .peerClosed:
          return .failure(BodyFailure(reason: .connectionLost))
        case .refused(let message):
          return .failure(
            BodyFailure(
              reason: .unsupportedType(message), refusal: Refusal(.unsupportedType, message),
              unreadBody: max(0, size - ticket.counter.bytes)))
        }
      } else {
        guard try await Self.move(remaining, with: transfer) else {
          return .failure(BodyFailure(reason: .connectionLost))
        }
      }
    } catch let error as SystemError {
      if error.code == ENOSPC || error.code == EDQUOT {
        return .failure(
          BodyFailure(
            reason: .insufficientStorage,
            refusal: Refusal(.writeFailed, "The disk filled up while the file was written.")))
      }
      return .failure(
        BodyFailure(
          reason: .writeFailed(error.reason),
          refusal: Refusal(.writeFailed, "The file couldn't be written: \(error.reason).")))
    } catch is Reactor.WaitError {
      return .failure(BodyFailure(reason: .timedOut))
    } catch is CancellationError {
      return .failure(BodyFailure(reason: .cancelled))
    } catch {
      return .failure(BodyFailure(reason: .connectionLost))
    }

    // The last byte is written: make it durable, and find out what a body that fitted in the
    // sniffed prefix is, off the cooperative pool.
    let durable = configuration.durability
    let alreadyFound = finding
    let finish = { @Sendable () -> Result<ContentInspector.Finding, SystemError> in
      if durable, fdatasync(fd) != 0 {
        return .failure(SystemError(call: "fdatasync", code: errno))
      }
      return .success(alreadyFound ?? inspector.inspect(fd: fd, fileExtension: fileExtension))
    }
    // Nothing to flush or sniff: skip the hop to the I/O pool.
    let finishing =
      durable || (finding == nil && inspector.sniffs)
      ? await BlockingPool.shared.run(finish) : finish()
    let found: ContentInspector.Finding
    switch finishing {
    case .success(let value): found = value
    case .failure(let error):
      return .failure(
        BodyFailure(
          reason: .writeFailed(error.reason),
          refusal: Refusal(.writeFailed, "The file couldn't be flushed to disk: \(error.reason).")))
    }
    if let refusal = found.refusal {
      return .failure(
        BodyFailure(reason: .unsupportedType(refusal), refusal: Refusal(.unsupportedType, refusal)))
    }
    if Task.isCancelled { return .failure(BodyFailure(reason: .cancelled)) }
    guard let server = services.server else { return .failure(BodyFailure(reason: .cancelled)) }
    switch await server.store(
      ticket, partial: partial, mimeType: found.mimeType, kind: found.kind)
    {
    case .success(let (_, changedFolders)):
      installed = true
      if durable {
        guard await services.folderSync.flush(changedFolders) else {
          return .success(
            Response.refusal(
              Refusal(.writeFailed, "The disk reported an error while the file was made durable.")))
        }
      }
      return .success(Response.created(path: ticket.path.value))
    case .failure(let refusal):
      // `store` has already reported the failure; the partial file goes on the way out.
      return .success(Response.refusal(refusal))
    }
  }

  /// Moves `count` body bytes into the file. A large body moves on the cooperative pool, so that
  /// many at once use every core and the event loop stays free for the small requests (see
  /// `Reactor`). Returns `false` when the peer closed first.
  private static func move(_ count: Int, with transfer: BodyTransfer) async throws -> Bool {
    count >= BodyTransfer.spliceThreshold
      ? try await withTaskExecutorPreference(globalConcurrentExecutor) {
        try await transfer.move(count)
      }
      : try await transfer.move(count)
  }

  /// How a body moved while its first bytes were inspected.
  private enum InspectedBody: Sendable {
    /// Every byte arrived, and inspection accepts the file.
    case complete(ContentInspector.Finding)
    /// The peer closed before the whole body arrived.
    case peerClosed
    /// Inspection refused the file (the message says why); the transfer was stopped there.
    case refused(String)
  }

  /// Moves the `count` bytes after the sniffed prefix (already in `fd`) while the prefix is
  /// inspected on the blocking pool, at the same time. A refusal stops the transfer at once.
  private static func move(
    _ count: Int, with transfer: BodyTransfer, whileInspecting inspector: ContentInspector,
    fd: Int32, fileExtension: String
  ) async throws -> InspectedBody {
    enum Step: Sendable {
      case moved(complete: Bool)
      case inspected(ContentInspector.Finding)
    }
    let executor: (any TaskExecutor)? =
      count >= BodyTransfer.spliceThreshold ? globalConcurrentExecutor : nil
    return try await withThrowingTaskGroup(of: Step.self) { group in
      group.addTask {
        .inspected(
          await BlockingPool.shared.run {
            inspector.inspect(fd: fd, fileExtension: fileExtension)
          })
      }
      group.addTask(executorPreference: executor) {
        .moved(complete: try await transfer.move(count))
      }
      var finding: ContentInspector.Finding?
      while let step = try await group.next() {
        switch step {
        case .inspected(let found):
          if let refusal = found.refusal {
            group.cancelAll()
            return .refused(refusal)
          }
          finding = found
        case .moved(let complete):
          if !complete {
            group.cancelAll()
            return .peerClosed
          }
        }
      }
      // Both children returned: the transfer completed and inspection accepted the file.
      guard let finding else { throw CancellationError() }
      return .complete(finding)
    }
  }

  /// Sends a refusal made while the body was still arriving, then reads and throws away the
  /// `unread` body bytes the peer has yet to send (each read bounded by the idle timeout).
  /// Closing with unread bytes would reset the connection, and a client that reads only after
  /// sending everything (a plain HTTP library) would lose the answer. Chromium recovers an
  /// answer sent before a reset, but not every client does. A client that reads at once (curl)
  /// stops sending and closes earlier.
  private func refuse(_ refusal: Refusal, thenDiscard unread: Int) async {
    do {
      try await socket.write(Response.refusal(refusal), deadline: ContinuousClock.now + idleTimeout)
    } catch {
      return
    }
    socket.shutdownOutput()
    if unread >= BodyTransfer.spliceThreshold {
      await withTaskExecutorPreference(globalConcurrentExecutor) { await discard(unread) }
    } else {
      await discard(unread)
    }
  }

  /// Reads and drops up to `count` bytes; stops at the end of the stream, an error or when the
  /// peer stays silent for the idle timeout.
  private func discard(_ count: Int) async {
    let scratch = UnsafeMutableRawBufferPointer.allocate(
      byteCount: min(count, BodyTransfer.bufferSize), alignment: 16)
    defer { scratch.deallocate() }
    var left = count
    while left > 0 {
      let want = UnsafeMutableRawBufferPointer(rebasing: scratch[..<min(left, scratch.count)])
      let read = try? await socket.read(into: want, deadline: ContinuousClock.now + idleTimeout)
      guard let read, read > 0 else { return }
      left -= read
    }
  }

  /// Sends a refusal, then closes without resetting the connection under the response.
  private func refuse(_ refusal: Refusal) async {
    do {
      try await socket.write(Response.refusal(refusal), deadline: ContinuousClock.now + idleTimeout)
    } catch {
      return
    }
    await closeGracefully()
  }

  /// Half-closes and reads what the peer still sends (up to a bound) so that unread request
  /// bytes do not make the kernel reset the connection before the response is read.
  private func closeGracefully() async {
    socket.shutdownOutput()
    let deadline = ContinuousClock.now + min(idleTimeout, .seconds(2))
    let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 * 1024, alignment: 16)
    defer { scratch.deallocate() }
    var drained = 0
    while drained < 8 * 1024 * 1024 {
      let count = try? await socket.read(into: scratch, deadline: deadline)
      guard let count, count > 0 else { return }
      drained += count
    }
  }
}

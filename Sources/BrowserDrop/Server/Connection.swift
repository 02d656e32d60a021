import FoundationEssentials

/// One connection: one request, one response, then close. Reads the head, lets
/// `RequestPolicy` decide, and serves the page, asks the server to admit an upload and hands
/// it to `UploadReceiver`, or refuses (`Connection+Replies.swift`).
struct Connection {
  let socket: Socket
  let services: SessionServices
  /// What the peer sent an earlier session that handed this connection over (`ParkedConnection`),
  /// read again before the socket; empty for a connection accepted here.
  var received: [UInt8] = []
  /// When the head must be complete: for a connection handed over, the deadline set when the
  /// earlier session accepted it (a slow head gets one idle timeout in all, not one per
  /// session); `nil` for a connection accepted here (one idle timeout from now).
  var headDeadline: Deadline?

  private static let headBufferSize = 64 * 1024

  var idleTimeout: IdleTimeout { services.idleTimeout }

  /// Serves the one request and closes the socket on every path before returning, or parks it,
  /// unanswered, for the next session when this one hands its listener over; either way the
  /// socket is no longer this session's when `run` returns, so the connection count the
  /// listener keeps (decremented as `run` returns) never lags behind the descriptors it holds.
  func run() async {
    let buffer = UnsafeMutableRawBufferPointer.allocate(
      byteCount: Self.headBufferSize, alignment: 16)
    defer { buffer.deallocate() }
    var filled = 0
    var headRead = false
    let deadline = headDeadline ?? idleTimeout.fromNow
    do {
      guard
        let (decision, headEnd) = try await readHead(
          into: buffer, filled: &filled, deadline: deadline)
      else {
        return socket.close()
      }
      headRead = true
      let bytes = UnsafeRawBufferPointer(rebasing: buffer[..<filled])
      if try await respond(to: decision, received: bytes, headEnd: headEnd, deadline: deadline) {
        return
      }
    } catch {
      // Timed out, cancelled or reset: close without a response. Cancelled while the head was
      // arriving because the session hands its listener over: the next session reads on.
      if !headRead, error is CancellationError,
        services.handover.park(
          socket, received: UnsafeRawBufferPointer(rebasing: buffer[..<filled]),
          headDeadline: deadline)
      {
        return
      }
    }
    socket.close()
  }

  /// Reads until the blank line ending the head and decides what to do with it. Returns the
  /// decision and where the head ends, `filled` telling how much of `buffer` holds bytes; `nil`
  /// when the peer closed first.
  private func readHead(
    into buffer: UnsafeMutableRawBufferPointer, filled: inout Int, deadline: Deadline
  ) async throws -> (RequestPolicy.Decision, Int)? {
    if !received.isEmpty {
      received.withUnsafeBytes { buffer.copyMemory(from: $0) }
      filled = received.count
      if let decided = decide(buffer, filled: filled, scanFrom: 0) { return decided }
    }
    while true {
      let count = try await socket.read(
        into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]), deadline: deadline)
      if count == 0 { return nil }
      let scanFrom = max(0, filled - 3)
      filled += count
      if let decided = decide(buffer, filled: filled, scanFrom: scanFrom) { return decided }
    }
  }

  /// The decision on the head in the first `filled` bytes of `buffer`, and where it ends; `nil`
  /// while it is unfinished and may still grow.
  private func decide(
    _ buffer: UnsafeMutableRawBufferPointer, filled: Int, scanFrom: Int
  ) -> (RequestPolicy.Decision, Int)? {
    let bytes = UnsafeRawBufferPointer(rebasing: buffer[..<filled])
    if let end = RequestHead.end(in: bytes, scanFrom: scanFrom) {
      let head = UnsafeRawBufferPointer(rebasing: buffer[..<end])
      return (services.requestPolicy.decide(head: head), end)
    }
    if filled > RequestHead.maximumSize {
      return (.refuse(RequestPolicy.refusal(forUnfinishedHead: bytes)), filled)
    }
    return nil
  }

  /// Answers the request whose head ends at `headEnd` of `received` (everything read so far).
  /// Returns `true` when the connection was parked for the next session instead, with
  /// `deadline`, the one its head was read under.
  private func respond(
    to decision: RequestPolicy.Decision, received: UnsafeRawBufferPointer, headEnd: Int,
    deadline: Deadline
  ) async throws -> Bool {
    switch decision {
    case .servePage(let path):
      try await serve(await services.page.response(for: path))
    case .serveConfiguration:
      try await serve(services.configResponse)
    case .refuse(let refusal):
      await refuse(refusal)
    case .admitUpload(let request):
      return await receiveUpload(
        request, received: received, headEnd: headEnd, headDeadline: deadline)
    }
    return false
  }

  private func serve(_ response: [UInt8]) async throws {
    try await socket.write(response, deadline: idleTimeout.fromNow)
    await closeGracefully()
  }

  /// Receives an upload; returns `true` when the connection was parked for the next session.
  private func receiveUpload(
    _ request: RequestPolicy.UploadRequest, received: UnsafeRawBufferPointer, headEnd: Int,
    headDeadline: Deadline
  ) async -> Bool {
    guard let server = services.server else { return false }
    if case .probe(let id) = request.resumable {
      await answerStanding(of: id, path: request.path, server: server)
      return false
    }
    let ticket: UploadTicket
    switch await admit(request, server: server) {
    case .accepted(let accepted): ticket = accepted
    case .refused(let refusal):
      await server.rememberRefusal(refusal, of: request)
      await refuse(refusal)
      return false
    case .measureFreeSpace:
      let refusal = Refusal(.insufficientStorage)
      await server.rememberRefusal(refusal, of: request)
      await refuse(refusal)
      return false
    case .handOver:
      if services.handover.park(socket, received: received, headDeadline: headDeadline) {
        return true
      }
      // The session ended some other way (`finish`, `cancel`) as it handed over: answered as
      // any session that no longer admits uploads answers, rather than closed without a word.
      await refuse(Refusal(.writeFailed, "The session is not accepting uploads."))
      return false
    }
    let leftover = UnsafeRawBufferPointer(rebasing: received[headEnd...])
    let receiver = UploadReceiver(socket: socket, services: services, ticket: ticket)
    switch await receiver.receive(expectsContinue: request.expectsContinue, leftover: leftover) {
    case .success(let response):
      try? await socket.write(response, deadline: idleTimeout.fromNow)
    case .failure(let failure) where failure.keptOffset != nil:
      // Cut off and kept: paused, to be resumed. Nobody is left to answer.
      await server.pause(ticket, keptBytes: failure.keptOffset ?? 0)
    case .failure(let failure):
      await server.abandon(ticket, reason: failure.reason)
      guard let refusal = failure.refusal else { return false }
      if failure.unreadBody > 0 {
        await refuse(refusal, thenDiscard: failure.unreadBody)
      } else {
        await refuse(refusal)
      }
    }
    return false
  }

  /// Asks the server to admit the upload; measures the free space (off the cooperative pool)
  /// and asks again when the server's last figure is too old to decide with.
  private func admit(
    _ request: RequestPolicy.UploadRequest, server: BrowserDropServer
  ) async -> BrowserDropServer.Admission {
    // Every upload goes through the resumable side when the extension is on: paused uploads'
    // remaining bytes count against free space for plain ones too.
    guard services.configuration.resumableUploads != nil else {
      let decision = await server.admit(request.path, size: request.size, freeBytes: nil)
      guard case .measureFreeSpace = decision else { return decision }
      let freeBytes = await services.measureFreeBytes()
      return await server.admit(request.path, size: request.size, freeBytes: freeBytes)
    }
    let hold = UploadHold()
    let decision = await server.admitResumable(request, hold: hold, freeBytes: nil)
    guard case .measureFreeSpace = decision else { return decision }
    let freeBytes = await services.measureFreeBytes()
    return await server.admitResumable(request, hold: hold, freeBytes: freeBytes)
  }

  /// `HEAD /upload`: where a resumable upload stands, after releasing a request still holding it.
  private func answerStanding(
    of id: UploadID, path: UploadPath, server: BrowserDropServer
  ) async {
    let standing = await server.standing(of: id, path: path)
    // The refusal of its last request, which a browser that read no answer did not see.
    let refused = await server.takeRefusal(of: id, path: path)
    switch standing {
    case .success(let standing):
      // Paused: say when the rest would not fit now. A browser that reads an answer only after
      // sending its whole body (Firefox, WebKit) sees a PATCH refused with 507 as a dropped
      // connection, and asks HEAD next: this is how it learns the reason.
      var restFits = true
      if standing.offset < standing.length {
        let freeBytes = await services.measureFreeBytes()
        restFits = await server.restFits(
          of: id, path: path, offset: standing.offset, freeBytes: freeBytes)
      }
      try? await socket.write(
        Response.uploadState(
          offset: standing.offset, length: standing.length, restFits: restFits,
          refused: refused),
        deadline: idleTimeout.fromNow)
      await closeGracefully()
    case .failure(var refusal):
      refusal.refusedBefore = refused
      await refuse(refusal)
    }
  }
}

import FoundationEssentials

/// One connection: one request, one response, then close. Reads the head, lets
/// `RequestPolicy` decide, and serves the page, asks the server to admit an upload and hands
/// it to `UploadReceiver`, or refuses (`Connection+Replies.swift`).
struct Connection {
  let socket: Socket
  let services: SessionServices

  private static let headBufferSize = 64 * 1024

  var idleTimeout: IdleTimeout { services.idleTimeout }

  /// Serves the one request and closes the socket on every path before returning, so the
  /// connection count the listener keeps never lags behind the descriptors actually open.
  func run() async {
    defer { socket.close() }
    let buffer = UnsafeMutableRawBufferPointer.allocate(
      byteCount: Self.headBufferSize, alignment: 16)
    defer { buffer.deallocate() }
    do {
      guard let (decision, headEnd, filled) = try await readHead(into: buffer) else { return }
      let leftover = UnsafeRawBufferPointer(rebasing: buffer[headEnd..<filled])
      try await respond(to: decision, leftover: leftover)
    } catch {
      // Timed out, cancelled or reset: close without a response.
    }
  }

  /// Reads until the blank line ending the head and decides what to do with it. Returns the
  /// decision, where the head ends and how much of `buffer` is filled; `nil` when the peer
  /// closed first.
  private func readHead(
    into buffer: UnsafeMutableRawBufferPointer
  ) async throws -> (RequestPolicy.Decision, Int, Int)? {
    let deadline = idleTimeout.fromNow
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
        return (services.requestPolicy.decide(head: head), end, filled)
      }
      if filled > RequestHead.maximumSize {
        return (.refuse(RequestPolicy.refusal(forUnfinishedHead: bytes)), filled, filled)
      }
    }
  }

  private func respond(
    to decision: RequestPolicy.Decision, leftover: UnsafeRawBufferPointer
  ) async throws {
    switch decision {
    case .servePage(let path):
      try await serve(await services.page.response(for: path))
    case .serveConfiguration:
      try await serve(services.configResponse)
    case .refuse(let refusal):
      await refuse(refusal)
    case .admitUpload(let request):
      await receiveUpload(request, leftover: leftover)
    }
  }

  private func serve(_ response: [UInt8]) async throws {
    try await socket.write(response, deadline: idleTimeout.fromNow)
    await closeGracefully()
  }

  private func receiveUpload(
    _ request: RequestPolicy.UploadRequest, leftover: UnsafeRawBufferPointer
  ) async {
    guard let server = services.server else { return }
    if case .probe(let id) = request.resumable {
      return await answerStanding(of: id, path: request.path, server: server)
    }
    let ticket: UploadTicket
    switch await admit(request, server: server) {
    case .accepted(let accepted): ticket = accepted
    case .refused(let refusal): return await refuse(refusal)
    case .measureFreeSpace: return await refuse(Refusal(.insufficientStorage))
    }
    let receiver = UploadReceiver(socket: socket, services: services, ticket: ticket)
    switch await receiver.receive(expectsContinue: request.expectsContinue, leftover: leftover) {
    case .success(let response):
      try? await socket.write(response, deadline: idleTimeout.fromNow)
    case .failure(let failure) where failure.keptOffset != nil:
      // Cut off and kept: paused, to be resumed. Nobody is left to answer.
      await server.pause(ticket, keptBytes: failure.keptOffset ?? 0)
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
    switch await server.standing(of: id, path: path) {
    case .success(let standing):
      try? await socket.write(
        Response.uploadState(offset: standing.offset, length: standing.length),
        deadline: idleTimeout.fromNow)
      await closeGracefully()
    case .failure(let refusal):
      await refuse(refusal)
    }
  }
}

import Synchronization

/// One upload in flight on a task of its own, the way the page sends one:
/// `POST /upload?path=…` with a Content-Length and no `Expect`. Started by `Uploader`.
package final class UploadInFlight: Sendable {
  private struct State {
    var socket: ClientSocket?
    var isCut = false
  }

  private let state = Mutex(State())
  private let feed: AsyncStream<[UInt8]>.Continuation
  private let body: AsyncStream<[UInt8]>
  private let task = Mutex<Task<Int, Never>?>(nil)

  /// Starts sending `head`, then the body: `bytes`, `rate` bytes a second at most when given,
  /// and then whatever is fed through `write(_:)` until `closeInput()`.
  init(head: String, bytes: [UInt8], rate: Int?, port: Int, fed: Bool) {
    (body, feed) = AsyncStream<[UInt8]>.makeStream()
    if !fed { feed.finish() }
    let started = Task { [self] in
      await run(head: Array(head.utf8), bytes: bytes, rate: rate, port: port)
    }
    task.withLock { $0 = started }
  }

  /// Queues `bytes` for the body; false once the upload has ended (or was never fed).
  @discardableResult
  package func write(_ bytes: some Collection<UInt8>) -> Bool {
    if case .enqueued = feed.yield(Array(bytes)) { return true }
    return false
  }

  /// Ends what the test feeds: the reply is read once what was queued has been sent.
  package func closeInput() { feed.finish() }

  /// Cuts the connection where it is (the server sees it close mid-body, as when a browser tab
  /// is closed); the status is then 0 unless the reply had arrived. Idempotent.
  package func cut() {
    feed.finish()
    let socket = state.withLock { state in
      state.isCut = true
      return state.socket
    }
    socket?.close()
  }

  /// The HTTP status, once the upload has ended; 0 when it did not complete. An upload still in
  /// flight after `timeout` is cut.
  package func status(timeout: Duration) async -> Int {
    let task = task.withLock { $0 }!
    let watchdog = Task { [self] in
      try await Task.sleep(for: timeout)
      cut()
    }
    defer { watchdog.cancel() }
    return await task.value
  }

  private func run(head: [UInt8], bytes: [UInt8], rate: Int?, port: Int) async -> Int {
    guard let socket = try? await ClientSocket(port: port, deadline: .now + RawClient.timeout)
    else { return 0 }
    let isCut = state.withLock { state in
      state.socket = socket
      return state.isCut
    }
    if isCut { socket.close() }
    let client = RawClient(socket: socket)
    do {
      try await client.send(head)
      try await Self.send(bytes, rate: rate, to: client)
      for await piece in body { try await client.send(piece) }
    } catch {
      // A server that refuses mid-body replies and closes: its reply is still there to read.
    }
    let reply = try? await client.readReply()
    socket.close()
    return reply?.status ?? 0
  }

  /// Sends `bytes`, paced to `rate` bytes a second (as curl's `--limit-rate`) when given.
  private static func send(_ bytes: [UInt8], rate: Int?, to client: RawClient) async throws {
    guard let rate else { return try await client.send(bytes) }
    // Pieces of a twentieth of a second, each sent when the bytes so far are due.
    let piece = max(1024, rate / 20)
    let start = ContinuousClock.now
    var sent = 0
    while sent < bytes.count {
      let end = min(bytes.count, sent + piece)
      try await client.send(bytes[sent..<end])
      sent = end
      try await Task.sleep(until: start + .seconds(Double(sent) / Double(rate)))
    }
  }
}

/// How a connection answers and closes without the kernel resetting it under the answer.
extension Connection {
  /// Sends a refusal made while the body was still arriving, then reads and throws away the
  /// `unread` body bytes the peer has yet to send (each read bounded by the idle timeout).
  /// Closing with unread bytes would reset the connection, and a client that reads only after
  /// sending everything (a plain HTTP library) would lose the answer. Chromium recovers an
  /// answer sent before a reset, but not every client does. A client that reads at once (curl)
  /// stops sending and closes earlier.
  func refuse(_ refusal: Refusal, thenDiscard unread: Int) async {
    do {
      try await socket.write(Response.refusal(refusal), deadline: idleTimeout.fromNow)
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
      let read = try? await socket.read(into: want, deadline: idleTimeout.fromNow)
      guard let read, read > 0 else { return }
      left -= read
    }
  }

  /// Sends a refusal, then closes without resetting the connection under the response.
  func refuse(_ refusal: Refusal) async {
    do {
      try await socket.write(Response.refusal(refusal), deadline: idleTimeout.fromNow)
    } catch {
      return
    }
    await closeGracefully()
  }

  /// Half-closes and reads what the peer still sends (up to a bound) so that unread request
  /// bytes do not make the kernel reset the connection before the response is read.
  func closeGracefully() async {
    socket.shutdownOutput()
    let deadline = idleTimeout.fromNow(atMost: .seconds(2))
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

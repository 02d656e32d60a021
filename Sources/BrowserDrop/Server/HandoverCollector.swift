import Synchronization

/// A connection a session accepted but did not answer, kept open for the next session: its
/// socket and the bytes it had sent (part of a head, or a head and the start of a body).
struct ParkedConnection: Sendable {
  let socket: Socket
  let received: [UInt8]
}

/// What a session hands over while `finishHandingOverListener` ends it: once it has begun,
/// the listening socket is kept rather than closed, and connections stopped before they were
/// answered are parked rather than cut. Shared by the server actor and the connections; a lock
/// keeps the few moves atomic.
final class HandoverCollector: Sendable {
  private struct State {
    var collecting = false
    var listener: Listener?
    var parked: [ParkedConnection] = []
  }

  private let state = Mutex(State())

  /// From now on the listener and unanswered connections are kept.
  func begin() {
    state.withLock { $0.collecting = true }
  }

  /// Whether the session is handing over.
  var isCollecting: Bool { state.withLock { $0.collecting } }

  /// Keeps `socket` for the next session when handing over; `false` when not (close it).
  func park(_ socket: Socket, received: UnsafeRawBufferPointer) -> Bool {
    state.withLock { state in
      guard state.collecting else { return false }
      state.parked.append(ParkedConnection(socket: socket, received: Array(received)))
      return true
    }
  }

  /// Keeps the listening socket when handing over; `false` when not (close it).
  func keep(_ listener: Listener) -> Bool {
    state.withLock { state in
      guard state.collecting else { return false }
      state.listener = listener
      return true
    }
  }

  /// Stops collecting and returns what was kept, once the listener task has ended; `nil` when
  /// no listener was kept (it was lost), the parked connections then closing with it.
  func end() -> ListenerHandover? {
    let (listener, parked) = state.withLock { state in
      state.collecting = false
      defer {
        state.listener = nil
        state.parked = []
      }
      return (state.listener, state.parked)
    }
    guard let listener else {
      for connection in parked { connection.socket.close() }
      return nil
    }
    return ListenerHandover(listener: listener, waiting: parked)
  }
}

import Synchronization

/// A connection a session accepted but did not answer, kept open for the next session: its
/// socket, the bytes it had sent (part of a head, or a head and the start of a body), and when
/// its head must be complete (the idle timeout that began when it was accepted, kept across
/// sessions).
struct ParkedConnection: Sendable {
  let socket: Socket
  let received: [UInt8]
  let headDeadline: Deadline
}

/// What a session hands over while `finishHandingOverListener` ends it: once it has begun, the
/// session accepts no more connections (they wait in the kernel's queue, bounded by the
/// listen backlog), the listening socket is kept rather than closed, and connections stopped
/// before they were answered are parked rather than cut, so the parked ones are at most
/// `maximumConnections`. Shared by the server actor and the connections; a lock keeps the few
/// moves atomic.
final class HandoverCollector: Sendable {
  private struct State {
    /// `begin()` was called: the accept loop accepts nothing more.
    var begun = false
    /// `discard()` was called: nothing is kept any more, whatever comes after.
    var discarded = false
    /// Between `begin()` and `end()` or `discard()`: the listener and parked connections are
    /// kept.
    var collecting = false
    /// The listening socket's descriptor while the accept loop may wait on it.
    var acceptingFD: Int32?
    var listener: Listener?
    var parked: [ParkedConnection] = []
  }

  private let state = Mutex(State())

  /// The accept loop waits on `fd` from now on; `false` when it must not accept any more.
  func accepting(on fd: Int32) -> Bool {
    state.withLock { state in
      guard !state.begun else { return false }
      state.acceptingFD = fd
      return true
    }
  }

  /// Whether the accept loop must stop: checked before every `accept`. An `accept` already
  /// past the check when `begin()` runs may still take one connection, which is then parked or
  /// served like any other (within `maximumConnections`).
  var stopsAccepting: Bool { state.withLock { $0.begun } }

  /// The accept loop stopped waiting on its descriptor (the listener is being closed or kept):
  /// `begin()` must not deregister that number, which the system may give to another socket.
  func stoppedAccepting() {
    state.withLock { $0.acceptingFD = nil }
  }

  /// From now on nothing is accepted, and the listener and unanswered connections are kept.
  /// Wakes the accept loop if it is waiting for a connection.
  func begin() {
    state.withLock { state in
      state.begun = true
      state.collecting = !state.discarded
      // The waiting accept loop gets `CancellationError`, sees `stopsAccepting` and returns.
      // Under the lock, so the loop can't close the descriptor (and the system give its number
      // to another socket) in between: it clears `acceptingFD` under this lock first.
      if let fd = state.acceptingFD { Reactor.shared.deregister(fd) }
    }
  }

  /// Keeps `socket` for the next session when handing over; `false` when not (answer or close
  /// it). `received` is copied before the lock is taken.
  func park(_ socket: Socket, received: UnsafeRawBufferPointer, headDeadline: Deadline) -> Bool {
    guard state.withLock({ $0.collecting }) else { return false }
    let connection = ParkedConnection(
      socket: socket, received: Array(received), headDeadline: headDeadline)
    return state.withLock { state in
      guard state.collecting else { return false }
      state.parked.append(connection)
      return true
    }
  }

  /// How many connections are parked so far (tests wait for one to park).
  var parkedCount: Int { state.withLock { $0.parked.count } }

  /// Keeps the listening socket when handing over; `false` when not (close it).
  func keep(_ listener: Listener) -> Bool {
    state.withLock { state in
      guard state.collecting else { return false }
      state.listener = listener
      return true
    }
  }

  /// Stops collecting and returns what was kept, once the listener task has ended; `nil` when
  /// no listener was kept (it was lost, or `discard()` ran), the parked connections then
  /// closing with it.
  func end() -> ListenerHandover? {
    let (listener, parked) = takeAll()
    guard let listener else {
      for connection in parked { connection.socket.close() }
      return nil
    }
    return ListenerHandover(listener: listener, waiting: parked)
  }

  /// Stops collecting and closes what was kept: the session ended some other way (`finish`,
  /// `cancel`) while handing over. Later `park` and `keep` calls answer `false`.
  func discard() {
    state.withLock { $0.discarded = true }
    let (listener, parked) = takeAll()
    for connection in parked { connection.socket.close() }
    listener?.close()
  }

  private func takeAll() -> (Listener?, [ParkedConnection]) {
    state.withLock { state in
      state.collecting = false
      defer {
        state.listener = nil
        state.parked = []
      }
      return (state.listener, state.parked)
    }
  }
}

import Synchronization

/// A listening socket handed from a session that ended with
/// ``BrowserDropServer/finishHandingOverListener(grace:)`` to the next one, which serves it with
/// ``BrowserDropServer/start(on:)``; with it, the connections the ended session had accepted
/// but not yet answered, with what they had sent.
///
/// The socket never closes in between, so a connection that arrives while one session ends and
/// the next starts waits in the kernel's queue and is served by the next session rather than
/// refused; so is one the ended session had accepted but not answered (at most its
/// `maximumConnections`). Not handed over, and cut: uploads and page responses still running
/// when the ended session's grace ran out (the bundled page resumes or sends them again), and
/// everything when the session ended some other way. Used by the `browserdrop` kiosk to close
/// a batch while phones keep uploading.
///
/// A session takes it once. Dropped unused, it closes the socket and those connections.
public final class ListenerHandover: Sendable {
  /// What the next session takes.
  struct Contents: Sendable {
    let listener: Listener
    let waiting: [ParkedConnection]
  }

  private struct State {
    var contents: Contents?
    var takenOver: Int?
  }

  /// The port the socket listens on.
  public let port: Int
  private let state: Mutex<State>

  init(listener: Listener, waiting: [ParkedConnection]) {
    port = listener.port
    state = Mutex(State(contents: Contents(listener: listener, waiting: waiting)))
  }

  /// How many connections the next session found waiting when it took the socket over with
  /// ``BrowserDropServer/start(on:)``: the ones the ended session had accepted but not answered,
  /// and the ones waiting in the kernel's accept queue at that moment (a connection that
  /// arrives once the next session serves the socket is its own, not counted). Each waits for
  /// the next session's answer: a request the switch did not refuse or cut (a browser's spare
  /// connection, opened ahead of a request, counts too). `nil` until a session took it.
  public var connectionsTakenOver: Int? { state.withLock { $0.takenOver } }

  /// The connections waiting to be served by the next session.
  var waitingCount: Int { state.withLock { $0.contents?.waiting.count ?? 0 } }

  /// The bytes those connections had sent, all together.
  var waitingBytes: Int {
    state.withLock { $0.contents?.waiting.reduce(0) { $0 + $1.received.count } ?? 0 }
  }

  /// The connections in the kernel's accept queue now; 0 once a session took the socket (tests
  /// wait for the server's side of their connections' handshakes).
  var queuedConnections: Int { state.withLock { $0.contents?.listener.queuedConnections ?? 0 } }

  /// The socket and the waiting connections, once; `nil` when a session took them already.
  /// Notes ``connectionsTakenOver``, reading the accept queue now: call it when nothing can
  /// fail any more and the socket is about to be served.
  func take() -> Contents? {
    state.withLock { state in
      guard let contents = state.contents.take() else { return nil }
      state.takenOver = contents.waiting.count + contents.listener.queuedConnections
      return contents
    }
  }
}

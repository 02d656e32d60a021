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

  /// The port the socket listens on.
  public let port: Int
  private let contents: Mutex<Contents?>

  init(listener: Listener, waiting: [ParkedConnection]) {
    port = listener.port
    contents = Mutex(Contents(listener: listener, waiting: waiting))
  }

  /// The connections waiting to be served by the next session.
  var waitingCount: Int { contents.withLock { $0?.waiting.count ?? 0 } }

  /// The bytes those connections had sent, all together.
  var waitingBytes: Int {
    contents.withLock { $0?.waiting.reduce(0) { $0 + $1.received.count } ?? 0 }
  }

  /// The socket and the waiting connections, once; `nil` when a session took them already.
  func take() -> Contents? {
    contents.withLock { $0.take() }
  }
}

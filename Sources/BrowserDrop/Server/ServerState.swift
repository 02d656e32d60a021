import Glibc

/// Where a `BrowserDropServer` is in its life; each case carries what exists in that state, so
/// a task or descriptor that belongs to another state can't be reached by mistake.
enum ServerState {
  /// What exists from a successful `start()` until the session ends, listening or not.
  struct Session {
    let services: SessionServices
    /// The session folder, open until the session ends (`StagingFolder.place`).
    let sessionFD: Int32
    /// Polls the interface addresses (`BrowserDropServer+Lifecycle.swift`).
    let monitor: Task<Void, Never>
    /// The port the listener was bound to: the one `resume()` listens on again.
    var port: Int
    var addresses: [Address]
    /// Publishes progress while uploads are in flight; `nil` when none are.
    var progressTask: Task<Void, Never>?
  }

  /// What is left once the session has ended: what `port` and `addresses` last said.
  struct Ended {
    var port: Int?
    var addresses: [Address]
  }

  /// Created, not started.
  case idle
  /// `start()` is creating the staging folder, loading the content database and binding;
  /// a second `start()` waits for the same task.
  case starting(Task<Void, any Error>)
  /// Accepting connections: `listener` runs them all (`SessionServices.serve`).
  case listening(Session, listener: Task<Void, Never>)
  /// `finishHandingOverListener` is ending the session: uploads admitted already may end,
  /// others are parked for the next session (`HandoverCollector`), nothing new is admitted.
  case finishing(Session, listener: Task<Void, Never>)
  /// Not listening (after `suspend()` or a lost listener); files and uploads' names are kept.
  case suspended(Session)
  /// Finished or cancelled.
  case ended(Ended)

  var session: Session? {
    switch self {
    case .listening(let session, _), .finishing(let session, _), .suspended(let session): session
    case .idle, .starting, .ended: nil
    }
  }

  var addresses: [Address] {
    switch self {
    case .listening(let session, _), .finishing(let session, _), .suspended(let session):
      session.addresses
    case .ended(let ended): ended.addresses
    case .idle, .starting: []
    }
  }

  var port: Int? {
    switch self {
    case .listening(let session, _), .finishing(let session, _), .suspended(let session):
      session.port
    case .ended(let ended): ended.port
    case .idle, .starting: nil
    }
  }

  /// Changes the session in place, listening, finishing or suspended; does nothing in other
  /// states.
  mutating func updateSession(_ change: (inout Session) -> Void) {
    switch self {
    case .listening(var session, let listener):
      change(&session)
      self = .listening(session, listener: listener)
    case .finishing(var session, let listener):
      change(&session)
      self = .finishing(session, listener: listener)
    case .suspended(var session):
      change(&session)
      self = .suspended(session)
    case .idle, .starting, .ended: break
    }
  }

  /// Cancels every task the state holds (the server is going away).
  func cancelTasks() {
    switch self {
    case .listening(let session, let listener), .finishing(let session, let listener):
      listener.cancel()
      session.monitor.cancel()
      session.progressTask?.cancel()
    case .suspended(let session):
      session.monitor.cancel()
      session.progressTask?.cancel()
    case .starting(let task): task.cancel()
    case .idle, .ended: break
    }
  }
}

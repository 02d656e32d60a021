import Synchronization
import Testing

@testable import BrowserDrop

/// A `SessionClock` that moves only when a test advances it, so timing rules are checked
/// exactly and without sleeping.
final class ManualClock: SessionClock {
  private struct Sleeper {
    let deadline: Duration
    let continuation: CheckedContinuation<Void, any Error>
  }

  private struct State {
    var now = Duration.zero
    var sleepers: [UInt64: Sleeper] = [:]
    var nextID: UInt64 = 0
    /// Tests waiting for a sleeper with a given deadline.
    var watchers: [(deadline: Duration, continuation: CheckedContinuation<Void, Never>)] = []
    /// Socket deadlines made so far (``deadline(after:)``).
    var deadlinesMade = 0
    /// Tests waiting for that count to reach a number.
    var deadlineWatchers: [DeadlineWatcher] = []
  }

  private typealias DeadlineWatcher = (
    id: UInt64, count: Int, continuation: CheckedContinuation<Void, Never>
  )

  private let state = Mutex(State())

  var now: Duration { state.withLock { $0.now } }

  func sleep(for duration: Duration) async throws {
    let id = state.withLock { state in
      defer { state.nextID += 1 }
      return state.nextID
    }
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { continuation in
        // Continuations are resumed outside the lock: the event loop reads `now` under its own
        // lock, and a resumed task may be queued on the loop.
        let (resumeNow, ready) = state.withLock {
          state -> (Bool, [(deadline: Duration, continuation: CheckedContinuation<Void, Never>)]) in
          let deadline = state.now + duration
          guard deadline > state.now else { return (true, []) }
          state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
          let (ready, waiting) = state.watchers.partitioned { $0.deadline == deadline }
          state.watchers = waiting
          return (false, ready)
        }
        for watcher in ready { watcher.continuation.resume() }
        if resumeNow { continuation.resume() }
      }
    } onCancel: {
      let sleeper = state.withLock { $0.sleepers.removeValue(forKey: id) }
      sleeper?.continuation.resume(throwing: CancellationError())
    }
  }

  /// A socket deadline on this clock (the connections' idle timeout), counted for
  /// ``deadlinesMade(_:)``; the event loop checks it when ``advance(by:)`` wakes it.
  func deadline(after duration: Duration) -> Deadline {
    let (deadline, ready) = state.withLock { state in
      state.deadlinesMade += 1
      let (ready, waiting) = state.deadlineWatchers.partitioned { $0.count <= state.deadlinesMade }
      state.deadlineWatchers = waiting
      return (Deadline.onClock(self, state.now + duration), ready)
    }
    for watcher in ready { watcher.continuation.resume() }
    return deadline
  }

  /// Returns once `count` socket deadlines have been made on this clock, or records an issue
  /// after `limit` of real time (so a count that is never reached fails the test, rather than
  /// holding the whole run).
  func deadlinesMade(
    _ count: Int, within limit: Duration = .seconds(20),
    sourceLocation: SourceLocation = #_sourceLocation
  ) async {
    let id = state.withLock { state in
      defer { state.nextID += 1 }
      return state.nextID
    }
    let timer = Task {
      try await Task.sleep(for: limit)
      let waiting = state.withLock { state in
        let index = state.deadlineWatchers.firstIndex { $0.id == id }
        return index.map { state.deadlineWatchers.remove(at: $0) }
      }
      guard let waiting else { return }
      let made = state.withLock { $0.deadlinesMade }
      Issue.record(
        "only \(made) of \(count) socket deadlines made within \(limit)",
        sourceLocation: sourceLocation)
      waiting.continuation.resume()
    }
    defer { timer.cancel() }
    await withCheckedContinuation { continuation in
      let reached = state.withLock { state -> Bool in
        if state.deadlinesMade >= count { return true }
        state.deadlineWatchers.append((id, count, continuation))
        return false
      }
      if reached { continuation.resume() }
    }
  }

  /// Moves time forward, waking every sleeper whose deadline has come and making the event loop
  /// check the socket deadlines.
  func advance(by duration: Duration) {
    let woken = state.withLock { state -> [Sleeper] in
      state.now += duration
      let due = state.sleepers.filter { $0.value.deadline <= state.now }
      for id in due.keys { state.sleepers.removeValue(forKey: id) }
      return due.values.sorted { $0.deadline < $1.deadline }
    }
    for sleeper in woken { sleeper.continuation.resume() }
    Reactor.shared.recheckDeadlines()
  }

  /// Returns once something sleeps until `deadline` (at once if something already does).
  func sleeper(until deadline: Duration) async {
    await withCheckedContinuation { continuation in
      let present = state.withLock { state -> Bool in
        if state.sleepers.values.contains(where: { $0.deadline == deadline }) { return true }
        state.watchers.append((deadline, continuation))
        return false
      }
      if present { continuation.resume() }
    }
  }

  /// The deadlines of everything asleep, earliest first.
  var deadlines: [Duration] { state.withLock { $0.sleepers.values.map(\.deadline).sorted() } }
}

extension Array {
  fileprivate func partitioned(by belongs: (Element) -> Bool) -> ([Element], [Element]) {
    (filter(belongs), filter { !belongs($0) })
  }
}

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
    /// Socket deadlines made so far (``deadline(after:)``).
    var deadlinesMade = 0
    /// Tests waiting for something to hold: a sleeper with a given deadline, a count of
    /// deadlines made (``sleeper(until:within:sourceLocation:)``,
    /// ``deadlinesMade(_:within:sourceLocation:)``).
    var watchers: [Watcher] = []

    /// Removes the watchers whose condition holds now, for their continuations to be resumed
    /// outside the lock.
    mutating func takeMetWatchers() -> [CheckedContinuation<Void, Never>] {
      let state = self
      let (met, waiting) = watchers.partitioned { $0.isMet(state) }
      watchers = waiting
      return met.map(\.continuation)
    }
  }

  private struct Watcher {
    let id: UInt64
    let isMet: @Sendable (State) -> Bool
    let continuation: CheckedContinuation<Void, Never>
  }

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
        // A cancellation that came before the sleeper was registered found nothing to end: it
        // is checked here, after registering, under the same lock as `onCancel` takes.
        let (resumeNow, cancelled, ready) = state.withLock {
          state -> (Bool, Bool, [CheckedContinuation<Void, Never>]) in
          let deadline = state.now + duration
          guard deadline > state.now else { return (true, false, []) }
          if Task.isCancelled { return (false, true, []) }
          state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
          return (false, false, state.takeMetWatchers())
        }
        for watcher in ready { watcher.resume() }
        if cancelled { continuation.resume(throwing: CancellationError()) }
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
      return (Deadline.onClock(self, state.now + duration), state.takeMetWatchers())
    }
    for watcher in ready { watcher.resume() }
    return deadline
  }

  /// Returns once `count` socket deadlines have been made on this clock, or records an issue
  /// after `limit` of real time (so a count that is never reached fails the test, rather than
  /// holding the whole run).
  func deadlinesMade(
    _ count: Int, within limit: Duration = .seconds(20),
    sourceLocation: SourceLocation = #_sourceLocation
  ) async {
    await wait(
      until: { $0.deadlinesMade >= count }, within: limit,
      otherwise: { "only \($0.deadlinesMade) of \(count) socket deadlines made within \(limit)" },
      sourceLocation: sourceLocation)
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

  /// Returns once something sleeps until `deadline` (at once if something already does), or
  /// records an issue after `limit` of real time: a sleeper that never comes (the task the test
  /// expects to sleep ended instead) fails the test, rather than holding the whole run.
  func sleeper(
    until deadline: Duration, within limit: Duration = .seconds(20),
    sourceLocation: SourceLocation = #_sourceLocation
  ) async {
    await wait(
      until: { $0.sleepers.values.contains { $0.deadline == deadline } }, within: limit,
      otherwise: { state in
        let asleep = state.sleepers.values.map(\.deadline).sorted()
        return "nothing slept until \(deadline) within \(limit) (asleep until: \(asleep))"
      },
      sourceLocation: sourceLocation)
  }

  /// Returns once `condition` holds for the clock's state (checked now, and again whenever a
  /// sleeper or a deadline is added), or records the issue `otherwise` describes after `limit`
  /// of real time.
  private func wait(
    until condition: @escaping @Sendable (State) -> Bool, within limit: Duration,
    otherwise failure: @escaping @Sendable (State) -> String, sourceLocation: SourceLocation
  ) async {
    let id = state.withLock { state in
      defer { state.nextID += 1 }
      return state.nextID
    }
    var timer: Task<Void, any Error>?
    await withCheckedContinuation { continuation in
      let met = state.withLock { state -> Bool in
        if condition(state) { return true }
        state.watchers.append(Watcher(id: id, isMet: condition, continuation: continuation))
        return false
      }
      if met { return continuation.resume() }
      // Started once the watcher is in place, so that it always finds it unless it was met.
      timer = Task {
        try await Task.sleep(for: limit)
        let expired = state.withLock { state -> (CheckedContinuation<Void, Never>, String)? in
          guard let index = state.watchers.firstIndex(where: { $0.id == id }) else { return nil }
          return (state.watchers.remove(at: index).continuation, failure(state))
        }
        guard let (continuation, message) = expired else { return }
        Issue.record(Comment(rawValue: message), sourceLocation: sourceLocation)
        continuation.resume()
      }
    }
    timer?.cancel()
  }

  /// The deadlines of everything asleep, earliest first.
  var deadlines: [Duration] { state.withLock { $0.sleepers.values.map(\.deadline).sorted() } }
}

extension Array {
  fileprivate func partitioned(by belongs: (Element) -> Bool) -> ([Element], [Element]) {
    (filter(belongs), filter { !belongs($0) })
  }
}

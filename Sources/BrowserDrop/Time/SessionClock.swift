/// The time the session's timing rules read: the connections' idle timeout, the progress
/// throttle, how long a free-space figure is trusted, the address poll and the pause between
/// re-listen attempts. A seam, so that tests advance time by hand (`ManualClock` in the tests)
/// instead of sleeping.
package protocol SessionClock: Sendable {
  /// Monotonic time since an arbitrary origin fixed when the clock was made. The event loop
  /// reads it under its own lock (for a deadline this clock made), so it must be quick and
  /// never call into the loop.
  var now: Duration { get }
  /// Suspends until `now` has advanced by `duration`, or throws `CancellationError`.
  func sleep(for duration: Duration) async throws
  /// The moment `duration` from now, for a wait on a socket (``Reactor``). The default is a
  /// time on this clock, which the event loop checks whenever it wakes: a clock that does not
  /// follow real time must call ``Reactor/recheckDeadlines()`` when it moves.
  func deadline(after duration: Duration) -> Deadline
}

extension SessionClock {
  /// A time on this clock, checked by the event loop whenever it wakes.
  package func deadline(after duration: Duration) -> Deadline {
    .onClock(self, now + duration)
  }
}

/// The real clock: `ContinuousClock`, which keeps counting while the machine sleeps, so that a
/// figure measured before a suspend is never trusted after it.
package struct SystemSessionClock: SessionClock {
  private let origin = ContinuousClock.now

  /// A clock whose origin is now.
  package init() {}

  /// Time since the clock was made.
  package var now: Duration { ContinuousClock.now - origin }

  /// `Task.sleep(for:)` on `ContinuousClock`.
  package func sleep(for duration: Duration) async throws {
    try await Task.sleep(for: duration)
  }

  /// An instant of `ContinuousClock`, which the event loop sleeps until.
  package func deadline(after duration: Duration) -> Deadline {
    .instant(.now + duration)
  }
}

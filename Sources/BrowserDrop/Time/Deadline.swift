/// When a wait on a socket gives up (``Reactor/wait(for:on:deadline:)``): made by a
/// ``SessionClock``, so that a test's manual clock drives the connections' idle timeout too.
package enum Deadline: Sendable {
  /// A moment of real time: the event loop sleeps until it at the latest.
  case instant(ContinuousClock.Instant)
  /// A time on a clock that does not follow real time; the loop checks it whenever it wakes,
  /// and the clock wakes the loop when it moves (``Reactor/recheckDeadlines()``).
  case onClock(any SessionClock, Duration)

  /// The instant to sleep until, for a deadline of real time.
  var instant: ContinuousClock.Instant? {
    if case .instant(let instant) = self { instant } else { nil }
  }

  /// Whether a deadline on a test's clock has come (a deadline of real time: `false`; the loop
  /// compares it with the time it read once for all).
  var hasPassedOnItsClock: Bool {
    if case .onClock(let clock, let time) = self { clock.now >= time } else { false }
  }
}

/// How long a connection may stay silent, on the session's clock.
struct IdleTimeout: Sendable {
  /// The configured timeout.
  let duration: Duration
  /// The session's clock.
  let clock: any SessionClock

  /// A deadline `duration` from now.
  var fromNow: Deadline { clock.deadline(after: duration) }

  /// A deadline at most `bound` from now: the idle timeout or `bound`, whichever is shorter.
  func fromNow(atMost bound: Duration) -> Deadline {
    clock.deadline(after: min(duration, bound))
  }
}

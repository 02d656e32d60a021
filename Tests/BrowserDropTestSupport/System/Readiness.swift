import Foundation
import Glibc
import Synchronization

/// Waits for descriptors to become readable or writable on one thread of its own, in `poll`.
///
/// The clients of a test must never block a cooperative thread: there are as many as cores (two
/// here), and the server under test needs them too. A thread per blocked call would do, but the
/// flood test holds a thousand connections open at once and measures the process's memory, so
/// one thread polls them all and resumes each waiter's continuation.
final class Readiness: Sendable {
  /// A wait that ended at its deadline.
  struct TimedOut: Error {}

  /// The one poller of the test process.
  static let shared = Readiness()

  private struct Waiter {
    let fd: Int32
    let events: Int16
    let deadline: ContinuousClock.Instant
    let continuation: CheckedContinuation<Void, any Error>
  }

  private struct State {
    var waiters: [UInt64: Waiter] = [:]
    var next: UInt64 = 0
  }

  private let state = Mutex(State())
  /// A pipe whose reading end is polled with the waiters: a byte written wakes the poller when a
  /// waiter is added (its descriptor joins the next `poll`).
  private let wakeRead: Int32
  private let wakeWrite: Int32

  private init() {
    var ends: [Int32] = [-1, -1]
    guard pipe2(&ends, O_CLOEXEC | O_NONBLOCK) == 0 else {
      fatalError("test support: no pipe for the poller (errno \(errno))")
    }
    (wakeRead, wakeWrite) = (ends[0], ends[1])
    let thread = Thread { [self] in run() }
    thread.name = "test-readiness"
    thread.start()
  }

  /// Waits until `fd` is readable (`POLLIN`) or writable (`POLLOUT`), or has failed or hung up
  /// (the next call on it then says how); throws `TimedOut` at `deadline`.
  func wait(_ fd: Int32, for events: Int16, deadline: ContinuousClock.Instant) async throws {
    try await withCheckedThrowingContinuation {
      (continuation: CheckedContinuation<Void, any Error>) in
      state.withLock { state in
        state.next += 1
        state.waiters[state.next] = Waiter(
          fd: fd, events: events, deadline: deadline, continuation: continuation)
      }
      wake()
    }
  }

  /// Makes the poller look at its waiters again: one was added, or a descriptor it waits on was
  /// closed (a closed descriptor does not end a `poll` in progress; the next one reports it).
  func wake() {
    var byte: UInt8 = 1
    // A full pipe already holds a wake-up, so a failed write loses nothing.
    _ = Glibc.write(wakeWrite, &byte, 1)
  }

  private func run() {
    while true {
      let waiting = state.withLock { $0.waiters.map { (id: $0.key, waiter: $0.value) } }
      var fds = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
      fds += waiting.map { pollfd(fd: $0.waiter.fd, events: $0.waiter.events, revents: 0) }
      let now = ContinuousClock.now
      let nearest = waiting.map(\.waiter.deadline).min()
      let timeout = nearest.map { Self.milliseconds(from: now, to: $0) } ?? -1
      // EINTR only means "poll again"; the loop does that anyway.
      _ = poll(&fds, nfds_t(fds.count), timeout)
      if fds[0].revents != 0 {
        var drain = [UInt8](repeating: 0, count: 256)
        while Glibc.read(wakeRead, &drain, drain.count) > 0 {}
      }
      let after = ContinuousClock.now
      let (ready, expired) = state.withLock { state in
        var ready: [CheckedContinuation<Void, any Error>] = []
        var expired: [CheckedContinuation<Void, any Error>] = []
        for (index, entry) in waiting.enumerated() {
          if fds[index + 1].revents != 0 {
            if let waiter = state.waiters.removeValue(forKey: entry.id) {
              ready.append(waiter.continuation)
            }
          } else if entry.waiter.deadline <= after {
            if let waiter = state.waiters.removeValue(forKey: entry.id) {
              expired.append(waiter.continuation)
            }
          }
        }
        return (ready, expired)
      }
      for continuation in ready { continuation.resume() }
      for continuation in expired { continuation.resume(throwing: TimedOut()) }
    }
  }

  private static func milliseconds(
    from now: ContinuousClock.Instant, to deadline: ContinuousClock.Instant
  ) -> Int32 {
    guard deadline > now else { return 0 }
    let (seconds, attoseconds) = (deadline - now).components
    // Rounded up, so the poller never wakes just before a deadline and spins.
    return Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1)
  }
}

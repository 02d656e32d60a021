import BrowserDropSystem
import CBrowserDropLinux
import Glibc
import Synchronization

/// The event loop: one thread waits for socket readiness and runs the connection tasks that
/// readiness resumes.
///
/// It is a `TaskExecutor`: the listener and the connections it starts prefer it, so a socket
/// that becomes readable resumes its task on this thread, without handing it to the cooperative
/// pool and waking one of its threads (W2 in the benchmark, many small uploads: the server's CPU
/// per file fell by about a fifth, and its sleeps per file by a quarter). The server actor runs
/// there too when a connection calls it, since a default actor runs on its caller's preferred
/// executor. What may block — `fsync`, `statvfs`, large libmagic calls — still goes to
/// `BlockingPool`, and large bodies move on the cooperative pool (`Connection`), so the loop
/// never waits on a disk for long.
final class Reactor: TaskExecutor, Sendable {
  /// What a task waits for.
  enum Interest: Sendable {
    case readable
    case writable
  }

  /// Why a wait ended without readiness.
  enum WaitError: Error {
    /// The deadline passed first.
    case timedOut
    /// The loop is not running: it was never started, or `epoll_wait` failed and ended it.
    case loopEnded
  }

  /// The process-wide reactor.
  static let shared = Reactor()

  private struct Waiter {
    var continuation: CheckedContinuation<Void, any Error>
    /// A deadline of real time, which the loop sleeps until at the latest.
    var instant: ContinuousClock.Instant?
    /// A deadline on a test's clock, checked whenever the loop wakes.
    var onClock: (clock: any SessionClock, time: Duration)?
    /// What it waits for: an edge of the other kind is kept for a later wait.
    var interest: Interest

    init(
      _ continuation: CheckedContinuation<Void, any Error>, deadline: Deadline?,
      interest: Interest
    ) {
      self.continuation = continuation
      self.interest = interest
      switch deadline {
      case .instant(let instant): self.instant = instant
      case .onClock(let clock, let time): onClock = (clock, time)
      case nil: break
      }
    }

    var hasDeadline: Bool { instant != nil || onClock != nil }

    func hasPassed(at now: ContinuousClock.Instant) -> Bool {
      if let instant { return instant <= now }
      if let onClock { return onClock.clock.now >= onClock.time }
      return false
    }
  }

  /// The loop's descriptors, while its thread runs.
  private struct Loop {
    let epollFD: Int32
    let wakeFD: Int32
  }

  private struct State {
    /// `nil` until ``start()`` succeeds, and again after `epoll_wait` failed.
    var loop: Loop?
    /// Set by a test to make the loop's next `epoll_wait` fail with this errno.
    var injectedWaitFailure: Int32?
    var waiters: [Int32: Waiter] = [:]
    /// File descriptors in the epoll set, each with the readiness the kernel reported for it
    /// that no waiter has taken yet (see ``Readiness``).
    var registered: [Int32: Readiness] = [:]
    var deadlineCount = 0
    /// The loop is in `epoll_wait` with no timeout: a new deadline must wake it.
    var sleepingWithoutTimeout = false
    /// The loop is in (or about to enter) `epoll_wait`: a new job must wake it.
    var sleeping = false
    /// Jobs enqueued on this executor, run in order before the next wait.
    var jobs: [UnownedJob] = []
    /// Periodic work run on the loop's thread between waits (``EventLoopTimer``). Kept when the
    /// loop ends, so a loop started again carries on with it.
    var timers: [UInt64: Timer] = [:]
    var nextTimerID: UInt64 = 0
  }

  /// A timer of ``EventLoopTimer``: when it is due next, how often (`nil`: once), what it runs.
  private struct Timer {
    var due: ContinuousClock.Instant
    let interval: Duration?
    let body: @Sendable (_ late: Duration) -> Void
  }

  /// Readiness reported by `epoll_wait`, as its event bits.
  ///
  /// A descriptor is added to the epoll set once, edge-triggered, for reading and writing, and
  /// stays there until ``deregister(_:)``: no `epoll_ctl` per wait (a one-shot registration
  /// needed one to re-arm every wait, about one per upload for the listener alone). An edge
  /// comes only when readiness changes, so one that arrives while no task waits is kept here and
  /// taken by the next wait, which then returns at once. Every caller must wait only after its
  /// non-blocking call found nothing to do (`EAGAIN`): readiness kept from before that call
  /// then costs one more try, never a missed wake-up, since an edge that comes after it is
  /// either handed to the waiter or kept for it, both under the lock. A call that failed
  /// otherwise (the accept loop's `EMFILE`) must not wait: nothing changes, so no edge comes.
  struct Readiness: OptionSet, Sendable {
    let rawValue: UInt32

    static let input = Readiness(rawValue: UInt32(cbd_epollin()))
    static let output = Readiness(rawValue: UInt32(cbd_epollout()))
    static let peerClosed = Readiness(rawValue: UInt32(cbd_epollrdhup()))
    static let hangUp = Readiness(rawValue: UInt32(cbd_epollhup()))
    static let error = Readiness(rawValue: UInt32(cbd_epollerr()))

    /// What ends a wait for `interest`: a reader also learns of the peer's end of stream, and
    /// either of a hang-up or an error, which its next call reports.
    static func ending(_ interest: Interest) -> Readiness {
      switch interest {
      case .readable: [.input, .peerClosed, .hangUp, .error]
      case .writable: [.output, .hangUp, .error]
      }
    }

    /// The events a descriptor is registered for, once.
    static let registration =
      UInt32(cbd_epollin() | cbd_epollout() | cbd_epollrdhup()) | UInt32(bitPattern: cbd_epollet())
  }

  private let state = Mutex(State())
  private static let wakeToken = UInt64.max

  init() {}

  /// Starts the loop's thread unless it runs already. Throws when the process has no descriptor
  /// left for the epoll set or its wake-up `eventfd`, or can't make a thread; a later call tries
  /// again. The server calls it from `start()`, so such a failure is an error its host sees, not
  /// a crash.
  func start() throws(SystemError) {
    try state.withLock { (state) throws(SystemError) in
      guard state.loop == nil else { return }
      let epollFD = try Syscall.blocking("epoll_create1") { cbd_epoll_create() }
      let wakeFD: Int32
      do throws(SystemError) {
        wakeFD = try Syscall.blocking("eventfd") { cbd_eventfd() }
        try Syscall.blocking("epoll_ctl") {
          cbd_epoll_ctl(epollFD, EPOLL_CTL_ADD, wakeFD, UInt32(cbd_epollin()), Self.wakeToken)
        }
      } catch {
        close(epollFD)
        throw error
      }
      let loop = Loop(epollFD: epollFD, wakeFD: wakeFD)
      do throws(SystemError) {
        try SystemThread.start(name: "bd-epoll") { [self] in run(loop) }
      } catch {
        close(wakeFD)
        close(epollFD)
        throw error
      }
      state.loop = loop
      state.registered = [:]
    }
  }

  /// Whether the loop runs.
  var isRunning: Bool { state.withLock { $0.loop != nil } }

  /// The running loop's epoll descriptor: a test reads the kernel's view of the set from
  /// `/proc/self/fdinfo`.
  package var epollDescriptorForTesting: Int32? { state.withLock { $0.loop?.epollFD } }

  /// Makes the loop's next `epoll_wait` fail with `code`, as a kernel failure would: a test
  /// seam for the path that ends the loop.
  package func injectWaitFailure(_ code: Int32) {
    let wakeFD = state.withLock { state -> Int32? in
      // Only a running loop takes it: a stale one would end the next loop at its first wake-up.
      guard let loop = state.loop else { return nil }
      state.injectedWaitFailure = code
      return loop.wakeFD
    }
    if let wakeFD { _ = cbd_eventfd_signal(wakeFD) }
  }

  /// Makes the loop check every deadline now: for a clock that does not follow real time (a
  /// test's manual clock), whose deadlines the loop can't sleep until, when it has moved.
  package func recheckDeadlines() {
    let wakeFD = state.withLock { state -> Int32? in
      guard let loop = state.loop, state.deadlineCount > 0 else { return nil }
      return loop.wakeFD
    }
    if let wakeFD { _ = cbd_eventfd_signal(wakeFD) }
  }

  /// Queues a job to run on the loop's thread; wakes the loop when it is waiting for events.
  /// While the loop isn't running, the job goes to the global concurrent executor instead, so a
  /// task that prefers this executor still runs.
  func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    let (running, wakeFD) = state.withLock { state -> (Bool, Int32?) in
      guard let loop = state.loop else { return (false, nil) }
      state.jobs.append(job)
      defer { state.sleeping = false }
      return (true, state.sleeping ? loop.wakeFD : nil)
    }
    if !running {
      globalConcurrentExecutor.enqueue(job)
    } else if let wakeFD {
      _ = cbd_eventfd_signal(wakeFD)
    }
  }

  /// Suspends until `fd` is ready for `interest`, the deadline passes (`WaitError.timedOut`) or
  /// the task is cancelled (`CancellationError`). Returns without suspending when readiness
  /// kept from an earlier edge ends the wait (see ``Readiness``).
  func wait(
    for interest: Interest, on fd: Int32, deadline: Deadline? = nil
  ) async throws {
    try Task.checkCancellation()
    if state.withLock({ Self.takeKept(interest, of: fd, from: &$0) }) { return }
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation {
        (continuation: CheckedContinuation<Void, any Error>) in
        switch register(continuation, for: interest, on: fd, deadline: deadline) {
        case .ready:
          continuation.resume()
        case .failed(let failure):
          continuation.resume(throwing: failure)
        case .waiting(let wakeLoop):
          if Task.isCancelled {
            // Cancelled between the check above and registration: the handler found no waiter.
            resume(fd, with: .failure(CancellationError()))
          } else if let wakeLoop {
            _ = cbd_eventfd_signal(wakeLoop)  // the loop recomputes its timeout
          }
        }
      }
    } onCancel: {
      resume(fd, with: .failure(CancellationError()))
    }
  }

  /// What ``register(_:for:on:deadline:)`` did with a wait.
  private enum Registration {
    /// Readiness kept since the check before it ends the wait.
    case ready
    case failed(any Error)
    /// Stored as the descriptor's waiter; the loop's wake-up descriptor when it must be woken
    /// to recompute its timeout.
    case waiting(wakeLoop: Int32?)
  }

  /// Stores a wait, adding `fd` to the epoll set the first time.
  private func register(
    _ continuation: CheckedContinuation<Void, any Error>, for interest: Interest, on fd: Int32,
    deadline: Deadline?
  ) -> Registration {
    state.withLock { state in
      guard let loop = state.loop else { return .failed(WaitError.loopEnded) }
      // A deadline on a test's clock may have passed before this wait: its clock's wake-up
      // (`recheckDeadlines`) came too early for it. Checked under the lock that wake-up's
      // check takes too, so no advance of the clock goes unseen.
      if deadline?.hasPassedOnItsClock == true {
        return .failed(WaitError.timedOut)
      }
      // An edge may have come since the check before the continuation.
      if Self.takeKept(interest, of: fd, from: &state) { return .ready }
      if state.registered[fd] == nil {
        // Added with whatever readiness it has now: the kernel reports that as a first edge.
        let token = UInt64(UInt32(bitPattern: fd))
        guard cbd_epoll_ctl(loop.epollFD, EPOLL_CTL_ADD, fd, Readiness.registration, token) == 0
        else {
          return .failed(SystemError.last("epoll_ctl"))
        }
        state.registered[fd] = []
      }
      state.waiters[fd] = Waiter(continuation, deadline: deadline, interest: interest)
      var wakeLoop: Int32?
      if let deadline {
        state.deadlineCount += 1
        // A deadline on a test's clock needs no timeout: its clock wakes the loop.
        if deadline.instant != nil, state.sleepingWithoutTimeout {
          wakeLoop = loop.wakeFD
          state.sleepingWithoutTimeout = false
        }
      }
      return .waiting(wakeLoop: wakeLoop)
    }
  }

  /// Takes the readiness kept for `fd` that ends a wait for `interest`; whether there was any.
  private static func takeKept(_ interest: Interest, of fd: Int32, from state: inout State) -> Bool
  {
    let ending = Readiness.ending(interest)
    guard state.loop != nil, let kept = state.registered[fd], !kept.isDisjoint(with: ending)
    else { return false }
    state.registered[fd] = kept.subtracting(ending)
    return true
  }

  /// Forgets `fd`; call before closing it.
  func deregister(_ fd: Int32) {
    let waiter = state.withLock { state -> Waiter? in
      if state.registered.removeValue(forKey: fd) != nil, let loop = state.loop {
        _ = cbd_epoll_ctl(loop.epollFD, EPOLL_CTL_DEL, fd, 0, 0)
      }
      return take(fd, from: &state)
    }
    waiter?.continuation.resume(throwing: CancellationError())
  }

  private func take(_ fd: Int32, from state: inout State) -> Waiter? {
    guard let waiter = state.waiters.removeValue(forKey: fd) else { return nil }
    if waiter.hasDeadline { state.deadlineCount -= 1 }
    return waiter
  }

  private func resume(_ fd: Int32, with result: Result<Void, any Error>) {
    let waiter = state.withLock { take(fd, from: &$0) }
    waiter?.continuation.resume(with: result)
  }

  private func run(_ loop: Loop) {
    let (epollFD, wakeFD) = (loop.epollFD, loop.wakeFD)
    let capacity = 128
    let events = UnsafeMutablePointer<UInt32>.allocate(capacity: capacity)
    let tokens = UnsafeMutablePointer<UInt64>.allocate(capacity: capacity)
    var ready: [CheckedContinuation<Void, any Error>] = []
    var expired: [CheckedContinuation<Void, any Error>] = []
    var jobs: [UnownedJob] = []
    let executor = asUnownedTaskExecutor()
    while true {
      // Jobs queued meanwhile (resumed tasks, new connections) run before the next wait; jobs
      // they queue in turn wait for the next round, after the sockets have been polled again.
      for job in jobs { job.runSynchronously(on: executor) }
      jobs.removeAll(keepingCapacity: true)
      let timeout = state.withLock { state in
        if !state.jobs.isEmpty { return Int32(0) }
        let deadlineTimeout = nextDeadlineTimeout(in: state)
        // Without a deadline to watch, a new one must wake the loop, even when a timer would
        // (a watchdog ping every 15 s must not delay an idle timeout by 15 s).
        state.sleepingWithoutTimeout = deadlineTimeout < 0
        state.sleeping = true
        return nextTimeout(in: state, deadlineTimeout: deadlineTimeout)
      }
      let count: Int32
      do throws(SystemError) {
        count = try Syscall.blocking("epoll_wait") {
          cbd_epoll_wait(epollFD, events, tokens, Int32(capacity), timeout)
        }
      } catch {
        events.deallocate()
        tokens.deallocate()
        end(loop, because: error)
        return
      }
      let injected: Int32? = state.withLock { state in
        if let code = state.injectedWaitFailure.take() { return code }
        state.sleeping = false
        state.sleepingWithoutTimeout = false
        for index in 0..<Int(max(count, 0)) {
          if tokens[index] == Self.wakeToken {
            _ = cbd_eventfd_drain(wakeFD)
            continue
          }
          let fd = Int32(bitPattern: UInt32(truncatingIfNeeded: tokens[index]))
          // An event of a descriptor deregistered since `epoll_wait` returned is dropped.
          guard let kept = state.registered[fd] else { continue }
          let now = kept.union(Readiness(rawValue: events[index]))
          if let interest = state.waiters[fd]?.interest, !now.isDisjoint(with: .ending(interest)),
            let waiter = take(fd, from: &state)
          {
            state.registered[fd] = now.subtracting(.ending(interest))
            ready.append(waiter.continuation)
          } else {
            state.registered[fd] = now
          }
        }
        if state.deadlineCount > 0 {
          let now = ContinuousClock.now
          for (fd, waiter) in state.waiters where waiter.hasPassed(at: now) {
            if let waiter = take(fd, from: &state) { expired.append(waiter.continuation) }
          }
        }
        return nil
      }
      if let injected {
        events.deallocate()
        tokens.deallocate()
        end(loop, because: SystemError(call: "epoll_wait", code: injected))
        return
      }
      // A task that prefers this executor is queued here by its resumption, without a wake-up.
      for continuation in ready { continuation.resume() }
      for continuation in expired { continuation.resume(throwing: WaitError.timedOut) }
      ready.removeAll(keepingCapacity: true)
      expired.removeAll(keepingCapacity: true)
      runDueTimers()
      state.withLock { swap(&jobs, &$0.jobs) }
    }
  }

  /// Runs the timers that are due, on the loop's thread, outside the lock. The next run is
  /// counted from now, not from when it was due: after a stall a timer runs once, not once for
  /// every period it missed.
  private func runDueTimers() {
    let now = ContinuousClock.now
    let due = state.withLock { state -> [(Timer, Duration)] in
      guard !state.timers.isEmpty else { return [] }
      var due: [(Timer, Duration)] = []
      for (id, timer) in state.timers where timer.due <= now {
        due.append((timer, timer.due.duration(to: now)))
        if let interval = timer.interval {
          state.timers[id]?.due = now + interval
        } else {
          state.timers[id] = nil
        }
      }
      return due
    }
    for (timer, late) in due { timer.body(late) }
  }

  /// Adds a timer; wakes the loop when it sleeps, so it recomputes its timeout.
  fileprivate func addTimer(
    after delay: Duration, every interval: Duration?,
    _ body: @escaping @Sendable (_ late: Duration) -> Void
  ) -> UInt64 {
    let (id, wakeFD) = state.withLock { state -> (UInt64, Int32?) in
      state.nextTimerID += 1
      state.timers[state.nextTimerID] = Timer(
        due: .now + delay, interval: interval, body: body)
      defer { state.sleeping = false }
      return (state.nextTimerID, state.sleeping ? state.loop?.wakeFD : nil)
    }
    if let wakeFD { _ = cbd_eventfd_signal(wakeFD) }
    return id
  }

  fileprivate func removeTimer(_ id: UInt64) {
    state.withLock { _ = $0.timers.removeValue(forKey: id) }
  }

  /// Ends the loop after `epoll_wait` failed: every waiting task gets ``WaitError/loopEnded`` (the
  /// listener's task among them, so its session reports `.interrupted`), jobs still queued go to
  /// the global executor, and a later ``start()`` makes a new loop. The old descriptors are left
  /// open: another thread may be about to signal the wake-up `eventfd`, and a closed number could
  /// already belong to someone else.
  private func end(_ loop: Loop, because error: SystemError) {
    let (waiters, jobs) = state.withLock { state in
      defer {
        state.loop = nil
        state.waiters = [:]
        state.registered = [:]
        state.deadlineCount = 0
        state.jobs = []
        state.sleeping = false
        state.sleepingWithoutTimeout = false
      }
      return (Array(state.waiters.values), state.jobs)
    }
    for waiter in waiters { waiter.continuation.resume(throwing: WaitError.loopEnded) }
    for job in jobs { globalConcurrentExecutor.enqueue(job) }
  }

  /// The longest the loop sleeps while any deadline is set, so that a waiter with an earlier
  /// deadline than the one the loop sleeps for needs no wake-up: deadlines are idle timeouts of
  /// seconds, and this is their precision.
  private static let deadlineResolution: Int64 = 50

  /// Milliseconds until the earliest deadline (at most `deadlineResolution`) or timer, or -1
  /// (wait forever) when neither is set.
  private func nextTimeout(in state: State, deadlineTimeout deadline: Int32) -> Int32 {
    guard let timer = state.timers.values.lazy.map(\.due).min() else { return deadline }
    let remaining = ContinuousClock.now.duration(to: timer)
    let (seconds, attoseconds) = max(remaining, .zero).components
    // Rounded up: a loop that wakes a little early would only sleep again at once.
    let milliseconds = Int32(
      clamping: seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
    return deadline < 0 ? milliseconds : min(deadline, milliseconds)
  }

  private func nextDeadlineTimeout(in state: State) -> Int32 {
    guard state.deadlineCount > 0 else { return -1 }
    let now = ContinuousClock.now
    var earliest: ContinuousClock.Instant?
    for waiter in state.waiters.values {
      if let deadline = waiter.instant, earliest.map({ deadline < $0 }) ?? true {
        earliest = deadline
      }
    }
    guard let earliest else { return -1 }
    let remaining = now.duration(to: earliest)
    if remaining <= .zero { return 0 }
    let (seconds, attoseconds) = remaining.components
    let milliseconds = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
    return Int32(clamping: min(milliseconds, Self.deadlineResolution))
  }
}

/// Periodic work on the event loop's own thread, between two `epoll_wait`s: for what must prove
/// that the loop turns (a systemd watchdog ping) or measure how late it turns (its lag). A body
/// runs on the loop, so it must be quick and never block.
package enum EventLoopTimer {
  /// An added timer, to remove it with ``remove(_:)``.
  package struct ID: Sendable, Hashable {
    fileprivate let value: UInt64
  }

  /// Runs `body` on the loop's thread every `interval`, first after `interval`. `body` gets how
  /// late the run is against when it was due (the loop's lag). While the loop isn't running
  /// (before a server starts it, or after `epoll_wait` failed) nothing runs.
  @discardableResult
  package static func every(
    _ interval: Duration, _ body: @escaping @Sendable (_ late: Duration) -> Void
  ) -> ID {
    ID(value: Reactor.shared.addTimer(after: interval, every: interval, body))
  }

  /// Stops a timer; a run already started finishes.
  package static func remove(_ id: ID) {
    Reactor.shared.removeTimer(id.value)
  }

  /// Test seam: blocks the loop's thread for `duration`, `delay` from now, as a wedged loop
  /// would be, so a test can see that a watchdog ping stops and the lag grows.
  package static func stallForTesting(after delay: Duration, for duration: Duration) {
    _ = Reactor.shared.addTimer(after: delay, every: nil) { _ in Syscall.sleep(duration) }
  }
}

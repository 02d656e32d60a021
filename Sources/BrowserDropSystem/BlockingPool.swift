import Glibc
import Synchronization

/// Threads of its own for calls that may block — `fsync`, `statvfs`, libmagic on big buffers,
/// libsmbclient — so they never occupy the cooperative pool's threads (two on these machines).
///
/// A pool of one thread is a serial lane: its jobs run one at a time, in the order they were
/// submitted (what libsmbclient needs: it is not thread-safe).
///
/// Threads start on demand, up to `threads`, and live until ``shutdown()``; ``start()`` starts
/// them all at once so that a failure to make a thread is reported where it can be handled (a
/// server's `start()`), rather than later. When the pool has no thread at all and none can be
/// made, the jobs waiting run on the thread that submitted one, one at a time and in order, with
/// every asynchronous signal blocked meanwhile: slower, but nothing is lost and nothing crashes.
///
/// `@unchecked Sendable`: every stored variable is only touched while `condition` is locked.
package final class BlockingPool: @unchecked Sendable {
  /// The name its threads carry, with their number (`bd-io-0`).
  package let name: String
  /// The most threads it runs at once.
  package let threadLimit: Int

  private let condition = ThreadCondition()
  private var jobs: [@Sendable () -> Void] = []
  private var head = 0
  /// Threads running, or counted while being made.
  private var threads = 0
  private var idle = 0
  /// Submitters running queued jobs themselves because no thread could be made; no thread is
  /// made meanwhile, so a lane never runs two jobs at once.
  private var inlineRunners = 0
  private var nextIndex = 0
  private var shuttingDown = false
  private var stopped: [CheckedContinuation<Void, Never>] = []
  /// Held by the one submitter that runs queued jobs itself, from taking a job to its end, so
  /// jobs still run one at a time and in order.
  private let inline = Mutex(())
  private let threadIDs = Mutex<[pthread_t]>([])
  private let makeThread: ThreadMaker

  /// How a pool makes a thread: ``SystemThread/start(name:_:)``, or a stand-in that fails, so a
  /// test can see what the pool does when the system has no thread to give.
  package typealias ThreadMaker =
    @Sendable (String, @escaping @Sendable () -> Void) throws(SystemError) -> Void

  /// A pool of up to `threads` threads named `name-N`. Starts none until work arrives or
  /// ``start()`` is called.
  package init(name: String, threads: Int, makeThread: @escaping ThreadMaker = SystemThread.start) {
    self.name = name
    self.threadLimit = max(1, threads)
    self.makeThread = makeThread
  }

  /// A serial lane: one thread, jobs in order.
  package static func serial(name: String) -> BlockingPool {
    BlockingPool(name: name, threads: 1)
  }

  /// Starts every thread the pool may have now. Throws when the system can't make one; the
  /// threads already running stay.
  package func start() throws(SystemError) {
    while true {
      let index: Int? = condition.withLock {
        guard !shuttingDown, threads < threadLimit, inlineRunners == 0 else { return nil }
        return countNewThread()
      }
      guard let index else { return }
      do {
        try startThread(index)
      } catch {
        threadEnded()
        throw error
      }
    }
  }

  /// Runs `body` on one of the pool's threads and returns its result.
  package func run<T: Sendable, E: Error>(
    _ body: @escaping @Sendable () throws(E) -> T
  ) async throws(E) -> T {
    let result: Result<T, E> = await withCheckedContinuation { continuation in
      submit {
        do throws(E) {
          continuation.resume(returning: .success(try body()))
        } catch {
          continuation.resume(returning: .failure(error))
        }
      }
    }
    return try result.get()
  }

  /// Runs `job` on one of the pool's threads without waiting for it. After ``shutdown()`` has
  /// ended every thread, it runs on the calling thread.
  package func submit(_ job: @escaping @Sendable () -> Void) {
    enum Next {
      case queued
      case startThread(Int)
      case runHere
    }
    let next: Next = condition.withLock {
      jobs.append(job)
      if idle > 0 {
        condition.signal()
        return .queued
      }
      if threads == 0 && (shuttingDown || inlineRunners > 0) { return .runHere }
      guard !shuttingDown, threads < threadLimit, inlineRunners == 0 else { return .queued }
      return .startThread(countNewThread())
    }
    switch next {
    case .queued:
      return
    case .startThread(let index):
      do {
        try startThread(index)
      } catch {
        threadEnded()
      }
    case .runHere:
      settle()
    }
  }

  /// Stops taking new threads and returns once every job already submitted has run and every
  /// thread has ended.
  package func shutdown() async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let done = condition.withLock {
        shuttingDown = true
        condition.broadcast()
        guard threads > 0 || inlineRunners > 0 else { return true }
        stopped.append(continuation)
        return false
      }
      if done { continuation.resume() }
    }
  }

  /// Whether the calling thread is one of the pool's (for assertions that blocking work is where
  /// it belongs).
  package var runsCurrentThread: Bool {
    let current = pthread_self()
    return threadIDs.withLock { $0.contains { pthread_equal($0, current) != 0 } }
  }

  /// How many of its threads are running now.
  package var runningThreads: Int { condition.withLock { threads } }

  /// Counts a thread about to be made and returns its number; call with the lock held.
  private func countNewThread() -> Int {
    threads += 1
    defer { nextIndex += 1 }
    return nextIndex
  }

  private func startThread(_ index: Int) throws(SystemError) {
    try makeThread("\(name)-\(index)") { [self] in
      threadIDs.withLock { $0.append(pthread_self()) }
      work()
      let current = pthread_self()
      threadIDs.withLock { $0.removeAll { pthread_equal($0, current) != 0 } }
      threadEnded()
    }
  }

  /// A thread ended, or could not be made.
  private func threadEnded() {
    condition.withLock { threads -= 1 }
    settle()
  }

  /// With no thread left, nobody else will take the jobs waiting: they run here. Then, once
  /// nothing is left to run, ``shutdown()`` may return.
  private func settle() {
    runQueuedWhileThreadless()
    let waiters: [CheckedContinuation<Void, Never>] = condition.withLock {
      guard threads == 0, inlineRunners == 0, shuttingDown, head == jobs.count else { return [] }
      defer { stopped = [] }
      return stopped
    }
    for waiter in waiters { waiter.resume() }
  }

  /// Runs the jobs waiting while the pool has no thread at all, one at a time and in order: the
  /// job is taken while `inline` is held, and no thread is made while one runs.
  private func runQueuedWhileThreadless() {
    while true {
      let ran: Bool = inline.withLock { _ in
        let job: (@Sendable () -> Void)? = condition.withLock {
          guard threads == 0, head < jobs.count else { return nil }
          inlineRunners += 1
          return takeJob()
        }
        guard let job else { return false }
        Self.withSignalsBlocked(job)
        condition.withLock { inlineRunners -= 1 }
        return true
      }
      guard ran else { return }
    }
  }

  /// Runs `job` with every asynchronous signal blocked, as on the pool's own threads: a host's
  /// handler never runs inside it, and a `SIGPIPE` it raises (a peer that hung up on
  /// libsmbclient) is discarded rather than delivered when the mask is restored.
  private static func withSignalsBlocked(_ job: () -> Void) {
    var all = sigset_t()
    var previous = sigset_t()
    sigfillset(&all)
    // Fault signals stay deliverable, so a crash is still reported.
    for fault in [SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS] {
      sigdelset(&all, fault)
    }
    pthread_sigmask(SIG_BLOCK, &all, &previous)
    job()
    var pipe = sigset_t()
    sigemptyset(&pipe)
    sigaddset(&pipe, SIGPIPE)
    var pending = sigset_t()
    sigpending(&pending)
    if sigismember(&pending, SIGPIPE) == 1 && sigismember(&previous, SIGPIPE) == 0 {
      var none = timespec(tv_sec: 0, tv_nsec: 0)
      _ = sigtimedwait(&pipe, nil, &none)
    }
    pthread_sigmask(SIG_SETMASK, &previous, nil)
  }

  /// The next job; call with the lock held and a job waiting.
  private func takeJob() -> @Sendable () -> Void {
    let job = jobs[head]
    head += 1
    if head == jobs.count {
      jobs.removeAll(keepingCapacity: true)
      head = 0
    }
    return job
  }

  private func work() {
    while true {
      let job: (@Sendable () -> Void)? = condition.withLock {
        while head == jobs.count && !shuttingDown {
          idle += 1
          condition.wait()
          idle -= 1
        }
        return head == jobs.count ? nil : takeJob()
      }
      guard let job else { return }
      job()
    }
  }
}

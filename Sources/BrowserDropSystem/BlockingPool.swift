import Glibc
import Synchronization

/// Threads of its own for calls that may block — `fsync`, `statvfs`, libmagic on big buffers,
/// libsmbclient — so they never occupy the cooperative pool's threads (two on these machines).
///
/// A pool of one thread is a serial lane: its jobs run one at a time, in the order they were
/// submitted, always on the same thread (what libsmbclient needs: it is not thread-safe).
///
/// Threads start on demand, up to `threads`, and live until ``shutdown()``; ``start()`` starts
/// them all at once so that a failure to make a thread is reported where it can be handled (a
/// server's `start()`), rather than later. When no thread can be made at all, a job runs on the
/// thread that submitted it: slower, but nothing is lost and nothing crashes.
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
  private var threads = 0
  private var idle = 0
  private var shuttingDown = false
  private var stopped: [CheckedContinuation<Void, Never>] = []
  /// Held while a job runs on its submitter's thread because no thread could be made, so a
  /// serial lane stays serial even then.
  private let inline = Mutex(())
  private let threadIDs = Mutex<[pthread_t]>([])

  /// A pool of up to `threads` threads named `name-N`. Starts none until work arrives or
  /// ``start()`` is called.
  package init(name: String, threads: Int) {
    self.name = name
    self.threadLimit = max(1, threads)
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
        guard !shuttingDown, threads < threadLimit else { return nil }
        threads += 1
        return threads - 1
      }
      guard let index else { return }
      do {
        try startThread(index)
      } catch {
        condition.withLock { threads -= 1 }
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

  /// Runs `job` on one of the pool's threads without waiting for it. After ``shutdown()`` it runs
  /// on the calling thread.
  package func submit(_ job: @escaping @Sendable () -> Void) {
    let newThread: Int?? = condition.withLock {
      if shuttingDown { return .some(nil) }
      jobs.append(job)
      if idle > 0 {
        condition.signal()
        return nil
      }
      guard threads < threadLimit else { return nil }
      threads += 1
      return .some(threads - 1)
    }
    switch newThread {
    case .none:
      return
    case .some(.none):
      inline.withLock { _ in job() }
    case .some(.some(let index)):
      do {
        try startThread(index)
      } catch {
        condition.withLock { threads -= 1 }
        runQueuedWhileThreadless()
      }
    }
  }

  /// Stops taking work and returns once every job already submitted has run and every thread has
  /// ended.
  package func shutdown() async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let done = condition.withLock {
        shuttingDown = true
        condition.broadcast()
        guard threads > 0 else { return true }
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

  private func startThread(_ index: Int) throws(SystemError) {
    try SystemThread.start(name: "\(name)-\(index)") { [self] in
      threadIDs.withLock { $0.append(pthread_self()) }
      work()
      let current = pthread_self()
      threadIDs.withLock { $0.removeAll { pthread_equal($0, current) != 0 } }
      let waiters: [CheckedContinuation<Void, Never>] = condition.withLock {
        threads -= 1
        guard threads == 0 else { return [] }
        defer { stopped = [] }
        return stopped
      }
      for waiter in waiters { waiter.resume() }
    }
  }

  /// A thread could not be made for a job: while the pool has no thread at all, nobody else
  /// will take the jobs waiting, so they run here, one at a time.
  private func runQueuedWhileThreadless() {
    while true {
      let job: (@Sendable () -> Void)? = condition.withLock {
        guard threads == 0, head < jobs.count else { return nil }
        return takeJob()
      }
      guard let job else { return }
      inline.withLock { _ in job() }
    }
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

import BrowserDropThreads
import CBrowserDropLinux
import Glibc
import Synchronization

/// A few dedicated threads for calls that may block (`fsync`, `statvfs`, libmagic on big buffers),
/// so they never occupy the cooperative pool's threads.
///
/// `@unchecked Sendable`: `jobs` and `head` are only touched while `condition` is locked.
final class BlockingPool: @unchecked Sendable {
  /// The process-wide pool.
  static let shared = BlockingPool(threads: 4, name: "bd-io")

  private let condition = ThreadCondition()
  private var jobs: [@Sendable () -> Void] = []
  private var head = 0
  /// The pool's threads, each added by itself as it starts.
  private let threadIDs = Mutex<[pthread_t]>([])

  init(threads: Int, name: String) {
    for index in 0..<threads {
      startThread { [self] in
        threadIDs.withLock { $0.append(pthread_self()) }
        cbd_set_thread_name("\(name)-\(index)")
        cbd_block_async_signals()
        self.work()
      }
    }
  }

  /// Runs `body` on one of the pool's threads and returns its result.
  func run<T: Sendable, E: Error>(
    _ body: @escaping @Sendable () throws(E) -> T
  ) async throws(E)
    -> T
  {
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

  /// Whether the calling thread is one of the pool's (for assertions that blocking work is
  /// where it belongs).
  var runsCurrentThread: Bool {
    let current = pthread_self()
    return threadIDs.withLock { $0.contains { pthread_equal($0, current) != 0 } }
  }

  /// Runs `job` on one of the pool's threads, without waiting for it.
  func submit(_ job: @escaping @Sendable () -> Void) {
    condition.lock()
    jobs.append(job)
    condition.signal()
    condition.unlock()
  }

  private func work() {
    while true {
      condition.lock()
      while head == jobs.count { condition.wait() }
      let job = jobs[head]
      head += 1
      if head == jobs.count {
        jobs.removeAll(keepingCapacity: true)
        head = 0
      }
      condition.unlock()
      job()
    }
  }
}

import BrowserDropThreads
import CBrowserDropLinux
import Glibc

/// One thread of its own that runs submitted jobs in order, so blocking calls (libsmbclient,
/// `fsync`, big copies) never occupy the cooperative pool's two threads.
///
/// `@unchecked Sendable`: `jobs` is only touched while `condition` is locked.
final class DedicatedThread: @unchecked Sendable {
  /// The thread that owns every libsmbclient call in the process (the library is not
  /// thread-safe, even with one context per thread).
  static let smb = DedicatedThread(name: "browserdrop-smb")

  /// Local file copying and `fsync`.
  static let localIO = DedicatedThread(name: "browserdrop-local-io")

  /// Reading source files ahead while the SMB thread writes the previous chunk.
  static let readAhead = DedicatedThread(name: "browserdrop-read-ahead")

  private let condition = ThreadCondition()
  private var jobs: [@Sendable () -> Void] = []

  private init(name: String) {
    startThread { [self] in
      // Named for ps, perf and gdb (the kernel takes 15 bytes at most and refuses longer names).
      cbd_set_thread_name(name)
      // Signals are the host program's business, whichever thread started the delivery.
      cbd_block_async_signals()
      self.work()
    }
  }

  /// Runs `body` on this thread and returns its result.
  func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    let result: Result<T, any Error> = await withCheckedContinuation { continuation in
      submit { continuation.resume(returning: Result { try body() }) }
    }
    return try result.get()
  }

  private func submit(_ job: @escaping @Sendable () -> Void) {
    condition.lock()
    jobs.append(job)
    condition.signal()
    condition.unlock()
  }

  private func work() {
    // libsmbclient blocks SIGPIPE only in the thread that initialises a context; a peer that
    // hangs up must become EPIPE for every thread of the process, never a signal that kills it.
    signal(SIGPIPE, SIG_IGN)
    while true {
      condition.lock()
      while jobs.isEmpty { condition.wait() }
      let batch = jobs
      jobs.removeAll(keepingCapacity: true)
      condition.unlock()
      for job in batch { job() }
    }
  }
}

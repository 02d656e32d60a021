import Glibc

/// A mutex with a condition variable, as `NSCondition`: `wait()` must be called with the lock
/// held, releases it while waiting and holds it again when it returns.
///
/// `@unchecked Sendable`: the pthread objects are made for use from many threads.
package final class ThreadCondition: @unchecked Sendable {
  private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
  private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

  /// An unlocked condition.
  package init() {
    pthread_mutex_init(mutex, nil)
    pthread_cond_init(condition, nil)
  }

  deinit {
    pthread_cond_destroy(condition)
    pthread_mutex_destroy(mutex)
    condition.deallocate()
    mutex.deallocate()
  }

  /// Takes the lock, waiting for it.
  package func lock() { pthread_mutex_lock(mutex) }

  /// Releases the lock.
  package func unlock() { pthread_mutex_unlock(mutex) }

  /// Releases the lock until `signal()` wakes this thread (or a spurious wake-up), then takes it
  /// again.
  package func wait() { pthread_cond_wait(condition, mutex) }

  /// Wakes one waiting thread.
  package func signal() { pthread_cond_signal(condition) }

  /// Wakes every waiting thread.
  package func broadcast() { pthread_cond_broadcast(condition) }

  /// Runs `body` with the lock held.
  package func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
    lock()
    defer { unlock() }
    return try body()
  }
}

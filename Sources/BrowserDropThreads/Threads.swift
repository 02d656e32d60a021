import Glibc

/// Starts a detached thread that runs `body` (pthreads: Foundation's `Thread` would load
/// libFoundation). Stops the process if the system can't make a thread.
package func startThread(_ body: @escaping @Sendable () -> Void) {
  final class Body {
    let run: @Sendable () -> Void
    init(_ run: @escaping @Sendable () -> Void) { self.run = run }
  }
  let context = Unmanaged.passRetained(Body(body)).toOpaque()
  var thread = pthread_t()
  let result = pthread_create(
    &thread, nil,
    { context in
      Unmanaged<Body>.fromOpaque(context!).takeRetainedValue().run()
      return nil
    }, context)
  precondition(result == 0, "pthread_create failed: error \(result)")
  pthread_detach(thread)
}

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
}

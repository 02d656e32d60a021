import CBrowserDropLinux
import Glibc

/// The one way the project starts a thread: named for `ps`, `perf` and `gdb`, with every
/// asynchronous signal blocked, detached.
///
/// Signals are the host program's business: a library thread that took `SIGINT` or `SIGTERM`
/// would run the host's handler on a thread the host doesn't know, and a thread that took
/// `SIGPIPE` from a peer hanging up (libsmbclient's sockets) would kill the process. With the
/// signal blocked in the thread, such a write fails with `EPIPE` instead, and nothing in the
/// process changes how it handles signals. pthreads rather than Foundation's `Thread`, which would
/// load libFoundation.
package enum SystemThread {
  /// The most bytes of a thread's name the kernel keeps; `pthread_setname_np` refuses a longer
  /// one outright (`ERANGE`) rather than cutting it, so names are cut here.
  package static let nameLimit = 15

  /// Starts a detached thread named `name` (its first ``nameLimit`` bytes) that runs `body`.
  /// Throws when the system can't make a thread (`EAGAIN` at the task or memory limit).
  package static func start(
    name: String, _ body: @escaping @Sendable () -> Void
  ) throws(SystemError) {
    final class Start {
      let name: String
      let body: @Sendable () -> Void
      init(name: String, body: @escaping @Sendable () -> Void) {
        self.name = name
        self.body = body
      }
    }
    var kept = Substring(name)
    while kept.utf8.count > nameLimit { kept = kept.dropLast() }
    let context = Unmanaged.passRetained(Start(name: String(kept), body: body)).toOpaque()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    // Blocked before the thread exists and inherited by it, so no signal can reach it between
    // its first instruction and a mask it would set itself.
    var all = sigset_t()
    var previous = sigset_t()
    sigfillset(&all)
    pthread_sigmask(SIG_BLOCK, &all, &previous)
    defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
    var thread = pthread_t()
    let result = pthread_create(
      &thread, &attributes,
      { context in
        let start = Unmanaged<Start>.fromOpaque(context!).takeRetainedValue()
        cbd_set_thread_name(start.name)
        // Fault signals must stay deliverable so a crash is reported, not hidden.
        cbd_block_async_signals()
        start.body()
        return nil
      }, context)
    if result != 0 {
      Unmanaged<Start>.fromOpaque(context).release()
      throw SystemError(call: "pthread_create", code: result)
    }
  }
}

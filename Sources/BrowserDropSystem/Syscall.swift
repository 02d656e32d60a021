import Glibc

/// The one gate for raw system calls that report failure as `-1` and `errno`: `EINTR` is retried
/// here and nowhere else, and any other failure throws a ``SystemError`` naming the call.
///
/// `close` is not a case for these wrappers: it must never be retried on Linux, where the
/// descriptor is gone even when it reports `EINTR` (see ``FileDescriptor``).
package enum Syscall {
  /// Runs `body` until it does not fail with `EINTR`; any other failure throws.
  @inline(__always)
  @discardableResult
  package static func blocking<T: BinaryInteger>(
    _ name: StaticString, _ body: () -> T
  ) throws(SystemError) -> T {
    while true {
      let result = body()
      if result >= 0 { return result }
      let code = errno
      if code == EINTR { continue }
      throw SystemError(call: "\(name)", code: code)
    }
  }

  /// Runs `body` until it does not fail with `EINTR`, and returns `nil` when the call would block
  /// (`EAGAIN`/`EWOULDBLOCK`) on a non-blocking descriptor; any other failure throws.
  @inline(__always)
  package static func nonBlocking<T: BinaryInteger>(
    _ name: StaticString, _ body: () -> T
  ) throws(SystemError) -> T? {
    while true {
      let result = body()
      if result >= 0 { return result }
      let code = errno
      if code == EINTR { continue }
      if code == EAGAIN || code == EWOULDBLOCK { return nil }
      throw SystemError(call: "\(name)", code: code)
    }
  }

  /// Runs a call that returns a pointer (`opendir`, `fdopendir`) until it does not fail with
  /// `EINTR`; `nil` with any other `errno` throws.
  @inline(__always)
  package static func pointer<T>(
    _ name: StaticString, _ body: () -> T?
  ) throws(SystemError) -> T {
    while true {
      if let result = body() { return result }
      let code = errno
      if code == EINTR { continue }
      throw SystemError(call: "\(name)", code: code)
    }
  }

  /// Sleeps for `duration` on the calling thread (`nanosleep`), continuing after a signal.
  package static func sleep(_ duration: Duration) {
    let (seconds, attoseconds) = duration.components
    var pause = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
    var remaining = timespec()
    while nanosleep(&pause, &remaining) != 0 && errno == EINTR { pause = remaining }
  }
}

import Glibc

/// A failed system call: its name and `errno`.
struct SystemError: Error, CustomStringConvertible, Equatable {
  /// The C function that failed.
  let call: String
  /// The `errno` it left.
  let code: Int32

  var description: String { "\(call): \(String(cString: strerror(code))) (errno \(code))" }

  /// The reason alone, for sentences such as "Can't listen on port 80: Address already in use".
  var reason: String { String(cString: strerror(code)) }
}

/// Every raw system call goes through here: `EINTR` is retried, `EAGAIN` becomes `nil`,
/// other failures throw `SystemError` naming the call.
enum Syscall {
  /// Runs `body` until it does not fail with `EINTR`; returns `nil` for `EAGAIN`/`EWOULDBLOCK`.
  @inline(__always)
  static func nonBlocking<T: BinaryInteger>(
    _ name: StaticString, _ body: () -> T
  ) throws(SystemError)
    -> T?
  {
    while true {
      let result = body()
      if result >= 0 { return result }
      let code = errno
      if code == EINTR { continue }
      if code == EAGAIN || code == EWOULDBLOCK { return nil }
      throw SystemError(call: "\(name)", code: code)
    }
  }

  /// Runs `body` until it does not fail with `EINTR`; any other failure throws.
  @inline(__always)
  @discardableResult
  static func blocking<T: BinaryInteger>(
    _ name: StaticString, _ body: () -> T
  ) throws(SystemError)
    -> T
  {
    while true {
      let result = body()
      if result >= 0 { return result }
      let code = errno
      if code == EINTR { continue }
      throw SystemError(call: "\(name)", code: code)
    }
  }
}

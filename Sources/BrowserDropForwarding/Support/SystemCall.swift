import Glibc

/// An `errno` captured from a failed system or libsmbclient call, with the call's name.
struct SystemError: Error, Sendable {
  /// The C `errno` value.
  let code: Int32
  /// The C function that failed, e.g. `smbc_open`.
  let call: String

  /// The `errno` left by the call that just failed.
  static func last(_ call: String) -> SystemError {
    SystemError(code: errno, call: call)
  }
}

/// Retries `body` while it fails with `EINTR`; throws the `errno` of any other failure.
@discardableResult
func retryingEINTR<T: BinaryInteger>(_ call: String, _ body: () -> T) throws(SystemError) -> T {
  while true {
    let result = body()
    if result >= 0 { return result }
    if errno != EINTR { throw SystemError.last(call) }
  }
}

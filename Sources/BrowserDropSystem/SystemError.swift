import Glibc

/// A failed system call: the C function's name and the `errno` it left.
///
/// The one error type of the system layer: both libraries and the command throw it from their
/// lowest layer and turn it into their own errors (a protocol error, a ``ForwardFailure``-style
/// sentence, a start-up failure) where they know what the call was for.
package struct SystemError: Error, Equatable, Sendable, CustomStringConvertible {
  /// The C function that failed, e.g. `openat` or `smbc_open`.
  package let call: String
  /// The `errno` it left.
  package let code: Int32

  /// An error for `call` that failed with `code`.
  package init(call: String, code: Int32) {
    self.call = call
    self.code = code
  }

  /// The error the calling thread's `errno` holds now, for the call that just failed.
  package static func last(_ call: String) -> SystemError {
    SystemError(call: call, code: errno)
  }

  /// `strerror`'s text alone, for sentences such as "Can't listen on port 80: Address already in
  /// use".
  package var reason: String { String(cString: strerror(code)) }

  /// `call: reason (errno N)`.
  package var description: String { "\(call): \(reason) (errno \(code))" }
}

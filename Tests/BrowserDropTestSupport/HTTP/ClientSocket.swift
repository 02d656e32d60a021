import Glibc
import Synchronization

/// A non-blocking TCP socket to 127.0.0.1 that the test owns: every call waits in `Readiness`
/// (never on a cooperative thread), bounded by a deadline.
package final class ClientSocket: Sendable {
  /// A failed call, with its name and errno.
  package struct Failure: Error, CustomStringConvertible {
    /// The C function that failed.
    package let call: String
    /// Its errno.
    package let code: Int32

    /// "call: strerror".
    package var description: String { "\(call): \(String(cString: strerror(code)))" }
  }

  private let descriptor: Mutex<Int32>

  /// Connects to 127.0.0.1:`port`; throws `Failure` (ECONNREFUSED, …) or
  /// `Readiness.TimedOut`.
  package init(port: Int, deadline: ContinuousClock.Instant) async throws {
    let fd = Glibc.socket(
      AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw Failure(call: "socket", code: errno) }
    descriptor = Mutex(fd)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let result = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    if result != 0 {
      // `deinit` closes the descriptor of a socket whose init threw after it was stored.
      guard errno == EINPROGRESS else { throw Failure(call: "connect", code: errno) }
      try await Readiness.shared.wait(fd, for: Int16(POLLOUT), deadline: deadline)
      var failure: Int32 = 0
      var length = socklen_t(MemoryLayout<Int32>.size)
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &failure, &length)
      if failure != 0 { throw Failure(call: "connect", code: failure) }
    }
  }

  deinit { close() }

  /// The descriptor, -1 once closed.
  package var fd: Int32 { descriptor.withLock { $0 } }

  /// Writes all of `bytes` (EPIPE is an error here, never a signal).
  package func write(
    _ bytes: some Collection<UInt8>, deadline: ContinuousClock.Instant
  ) async throws {
    var sent = 0
    let all = Array(bytes)
    while sent < all.count {
      let fd = self.fd
      let count = all[sent...].withUnsafeBytes {
        Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
      }
      if count >= 0 {
        sent += count
      } else if errno == EAGAIN {
        try await Readiness.shared.wait(fd, for: Int16(POLLOUT), deadline: deadline)
      } else if errno != EINTR {
        throw Failure(call: "send", code: errno)
      }
    }
  }

  /// Reads what has arrived into `buffer` (waiting until something has); 0 at the end.
  package func read(
    into buffer: UnsafeMutableRawBufferPointer, deadline: ContinuousClock.Instant
  ) async throws -> Int {
    while true {
      let fd = self.fd
      let count = Glibc.recv(fd, buffer.baseAddress, buffer.count, 0)
      if count >= 0 { return count }
      if errno == EAGAIN {
        try await Readiness.shared.wait(fd, for: Int16(POLLIN), deadline: deadline)
      } else if errno != EINTR {
        throw Failure(call: "recv", code: errno)
      }
    }
  }

  /// Closes the connection (FIN, or RST when unread bytes are left); later calls fail with
  /// EBADF. Idempotent.
  package func close() {
    let closed = descriptor.withLock { fd in
      defer { fd = -1 }
      return fd >= 0 && Glibc.close(fd) == 0
    }
    // A task waiting on it then reads or writes -1 and fails with EBADF, instead of waiting
    // out its deadline.
    if closed { Readiness.shared.wake() }
  }
}

import BrowserDropSystem
import CBrowserDropLinux
import Glibc
import Synchronization

/// A non-blocking socket whose waits go through the reactor.
final class Socket: Sendable {
  /// The file descriptor; owned, closed by `close()` or when the object goes away.
  let fd: Int32
  private let closed = Atomic(false)

  init(fd: Int32) { self.fd = fd }

  deinit { close() }

  /// Closes the socket once; a task waiting on it gets `CancellationError`.
  func close() {
    guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
    Reactor.shared.deregister(fd)
    Glibc.close(fd)
  }

  /// Reads what is there, waiting until something arrives or `deadline` passes.
  /// Returns 0 at end of stream.
  func read(
    into buffer: UnsafeMutableRawBufferPointer, deadline: Deadline?
  )
    async throws -> Int
  {
    while true {
      if let count = try Syscall.nonBlocking(
        "read", { Glibc.read(fd, buffer.baseAddress, buffer.count) })
      {
        return count
      }
      try await Reactor.shared.wait(for: .readable, on: fd, deadline: deadline)
    }
  }

  /// Writes all of `bytes`, waiting for room when the send buffer is full.
  func write(_ bytes: [UInt8], deadline: Deadline?) async throws {
    var offset = 0
    while offset < bytes.count {
      let sent = try bytes.withUnsafeBytes { raw in
        try Syscall.nonBlocking("send") {
          send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
        }
      }
      if let sent {
        offset += sent
      } else {
        try await Reactor.shared.wait(for: .writable, on: fd, deadline: deadline)
      }
    }
  }

  /// Half-closes the sending side so the peer sees the end of the response.
  func shutdownOutput() {
    _ = Glibc.shutdown(fd, Int32(SHUT_WR))
  }
}

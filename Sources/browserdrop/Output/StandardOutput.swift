import FoundationEssentials
import Glibc
import Synchronization

/// Writes whole pieces of text to a file descriptor, one writer at a time, at once (unbuffered),
/// so each JSON line or screen update leaves the process as soon as it is made.
final class StandardOutput: Sendable {
  /// Standard output.
  static let shared = StandardOutput(descriptor: STDOUT_FILENO)
  /// Standard error.
  static let error = StandardOutput(descriptor: STDERR_FILENO)

  private let descriptor: Int32
  private let lock = Mutex(())

  init(descriptor: Int32) {
    self.descriptor = descriptor
  }

  /// Writes `text` completely; a closed reader (`EPIPE`) is ignored.
  func write(_ text: String) {
    lock.withLock { _ in
      var bytes = Array(text.utf8)
      var offset = 0
      bytes.withUnsafeMutableBytes { buffer in
        while offset < buffer.count {
          let written = Glibc.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
          if written < 0 {
            if errno == EINTR || errno == EAGAIN { continue }
            return
          }
          offset += written
        }
      }
    }
  }

  /// Writes `text` followed by a newline.
  func line(_ text: String) {
    write(text + "\n")
  }
}

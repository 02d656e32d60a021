import BrowserDropSystem
import Glibc

/// A fixed-size buffer handed between the read-ahead thread and the thread that writes it.
///
/// `@unchecked Sendable`: a buffer is used by one thread at a time; the `await` between handing
/// it over orders the accesses.
final class ChunkBuffer: @unchecked Sendable {
  let bytes: UnsafeMutableRawBufferPointer
  /// Valid bytes at the start of `bytes`.
  var count = 0

  init(capacity: Int) {
    bytes = .allocate(byteCount: capacity, alignment: 4096)
  }

  /// Fills the buffer from `fd` at `offset`; `count` is 0 at end of file.
  func fill(from fd: Int32, at offset: Int64) throws(SystemError) {
    var filled = 0
    while filled < bytes.count {
      let got = try Syscall.blocking("pread") {
        pread(fd, bytes.baseAddress! + filled, bytes.count - filled, off_t(offset) + off_t(filled))
      }
      if got == 0 { break }
      filled += got
    }
    count = filled
  }

  /// Marks the buffer empty, as a read at end of file would.
  func clear() async throws { count = 0 }

  deinit { bytes.deallocate() }
}

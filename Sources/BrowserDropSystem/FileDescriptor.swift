import Glibc

/// An open file descriptor that this value owns: it is closed exactly once, by ``close()`` or
/// when the value goes away, unless ownership is handed on with ``take()``.
///
/// Non-copyable, so two owners of one descriptor (the bug behind a double `close` that shuts a
/// descriptor another thread has just been given) can't be written.
package struct FileDescriptor: ~Copyable, Sendable {
  /// The descriptor number; valid while this value lives.
  package let rawValue: Int32

  /// Takes ownership of `rawValue`, an open descriptor.
  package init(owning rawValue: Int32) {
    self.rawValue = rawValue
  }

  deinit { Glibc.close(rawValue) }

  /// Opens `path` relative to the folder `folder` (or the working folder for `AT_FDCWD`),
  /// adding `O_CLOEXEC` (`openat`).
  package static func open(
    _ path: String, _ flags: Int32, mode: UInt32 = 0o600, relativeTo folder: Int32 = AT_FDCWD
  ) throws(SystemError) -> FileDescriptor {
    let fd = try Syscall.blocking("openat") { openat(folder, path, flags | O_CLOEXEC, mode) }
    return FileDescriptor(owning: fd)
  }

  /// Hands the descriptor to the caller, who now closes it.
  package consuming func take() -> Int32 {
    let fd = rawValue
    discard self
    return fd
  }

  /// Closes the descriptor now, reporting what `close` says (an NFS or SMB mount may report a
  /// deferred write error only here). Never retried: on Linux the descriptor is released even
  /// when `close` fails with `EINTR`.
  package consuming func close() throws(SystemError) {
    let fd = take()
    if Glibc.close(fd) != 0 && errno != EINTR { throw SystemError.last("close") }
  }

  /// Flushes the file's data, and with `metadata` its size and times too, to the device
  /// (`fdatasync` or `fsync`).
  package borrowing func sync(metadata: Bool = true) throws(SystemError) {
    if metadata {
      try Syscall.blocking("fsync") { fsync(rawValue) }
    } else {
      try Syscall.blocking("fdatasync") { fdatasync(rawValue) }
    }
  }

  /// Writes every byte of `bytes` (`write` until done).
  package borrowing func writeAll(_ bytes: UnsafeRawBufferPointer) throws(SystemError) {
    var offset = 0
    while offset < bytes.count {
      offset += try Syscall.blocking("write") {
        Glibc.write(rawValue, bytes.baseAddress! + offset, bytes.count - offset)
      }
    }
  }

  /// Writes every byte of `bytes` at `position` (`pwrite` until done).
  package borrowing func writeAll(
    _ bytes: UnsafeRawBufferPointer, at position: Int64
  ) throws(SystemError) {
    var offset = 0
    while offset < bytes.count {
      offset += try Syscall.blocking("pwrite") {
        pwrite(
          rawValue, bytes.baseAddress! + offset, bytes.count - offset, off_t(position) + offset)
      }
    }
  }

  /// Reads up to `buffer.count` bytes at `position`; fewer only at the end of the file (`pread`
  /// until full or at the end).
  package borrowing func read(
    into buffer: UnsafeMutableRawBufferPointer, at position: Int64
  ) throws(SystemError) -> Int {
    var filled = 0
    while filled < buffer.count {
      let count = try Syscall.blocking("pread") {
        pread(
          rawValue, buffer.baseAddress! + filled, buffer.count - filled, off_t(position) + filled)
      }
      if count == 0 { break }
      filled += count
    }
    return filled
  }
}

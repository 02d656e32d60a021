import Glibc

/// Writes that survive a power cut, written once for every part of the project: a file's data
/// flushed, a rename made durable by flushing its folder, and a whole small file replaced so a
/// reader sees the old or the new content, never a mix or nothing.
package enum Durable {
  /// Flushes the folder at `path`, so names created, renamed or removed in it survive a power cut
  /// (`open` with `O_DIRECTORY`, then `fsync`).
  package static func syncFolder(_ path: String) throws(SystemError) {
    let folder = try FileDescriptor.open(path, O_RDONLY | O_DIRECTORY)
    try folder.sync()
  }

  /// Appends `bytes` to the file at `path` (created with `mode` when missing) and flushes it, so
  /// a record is on the device when this returns. A crash can leave a last line cut short; its
  /// readers skip such a line.
  package static func append(
    _ bytes: some Collection<UInt8>, to path: String, mode: UInt32 = 0o600
  ) throws(SystemError) {
    let file = try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_APPEND, mode: mode)
    try write(bytes, to: file)
    try file.sync()
    try file.close()
  }

  /// Replaces the file at `path` with `bytes` atomically and durably: written to a new hidden
  /// file beside it, flushed, renamed over `path`, then the folder flushed. A reader sees the old
  /// content or the new, never a part; on failure the hidden file is removed and `path` is as it
  /// was.
  package static func replace(
    _ path: String, with bytes: some Collection<UInt8>, mode: UInt32 = 0o600
  ) throws(SystemError) {
    let (folder, name) = split(path)
    // Unique per writer, so two processes replacing one file never write into each other's copy.
    let temporary = folder + "/." + name + ".tmp-\(getpid())-\(UInt32.random(in: .min ... .max))"
    do throws(SystemError) {
      let file = try FileDescriptor.open(
        temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: mode)
      try write(bytes, to: file)
      try file.sync()
      try file.close()
      try Syscall.blocking("rename") { rename(temporary, path) }
    } catch {
      unlink(temporary)
      throw error
    }
    try syncFolder(folder)
  }

  private static func write(
    _ bytes: some Collection<UInt8>, to file: borrowing FileDescriptor
  ) throws(SystemError) {
    func write(_ buffer: UnsafeBufferPointer<UInt8>) -> Result<Void, SystemError> {
      Result { () throws(SystemError) in try file.writeAll(UnsafeRawBufferPointer(buffer)) }
    }
    let result =
      bytes.withContiguousStorageIfAvailable(write)
      ?? Array(bytes).withUnsafeBufferPointer(write)
    try result.get()
  }

  /// The folder holding `path` ("." for a bare name) and the last component.
  private static func split(_ path: String) -> (folder: String, name: String) {
    guard let slash = path.lastIndex(of: "/") else { return (".", path) }
    let folder = String(path[..<slash])
    return (folder.isEmpty ? "/" : folder, String(path[path.index(after: slash)...]))
  }
}

import CBrowserDropLinux
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

  /// Appends the record `bytes` (one line, ending in a newline) to the file at `path` (created
  /// with `mode` when missing) and flushes it, so it is on the device when this returns; when
  /// this call created the file, its folder is flushed too, so the name survives as well.
  ///
  /// A crash can leave a last line cut short; its readers skip such a line, and the next record
  /// starts on a line of its own (a newline is written first). A record that fails part-way
  /// (disk full) or whose flush fails is cut off again, so the file ends as it was and a record
  /// the caller was told failed is never read later (`cbd_append_record`).
  package static func append(
    _ bytes: some Collection<UInt8>, to path: String, mode: UInt32 = 0o600
  ) throws(SystemError) {
    let file: FileDescriptor
    var created = false
    // Read too: the file's last byte says whether a cut-short line needs ending first.
    do throws(SystemError) {
      file = try FileDescriptor.open(path, O_RDWR | O_APPEND)
    } catch  where error.code == ENOENT {
      file = try FileDescriptor.open(path, O_RDWR | O_APPEND | O_CREAT, mode: mode)
      created = true
    }
    let descriptor = file.rawValue
    func appendRecord(_ record: UnsafeBufferPointer<UInt8>) -> SystemError? {
      var call: UnsafePointer<CChar>?
      let code = cbd_append_record(descriptor, record.baseAddress, record.count, &call)
      return code == 0 ? nil : SystemError(call: call.map { String(cString: $0) } ?? "", code: code)
    }
    let failure =
      bytes.withContiguousStorageIfAvailable(appendRecord)
      ?? Array(bytes).withUnsafeBufferPointer(appendRecord)
    if let failure { throw failure }
    try file.close()
    if created { try syncFolder(split(path).folder) }
  }

  /// Replaces the file at `path` with `bytes` atomically and durably: written to a new hidden
  /// file beside it (with the permissions of the file it replaces, or `mode` for a new one),
  /// flushed, renamed over `path`, then the folder flushed. A reader sees the old content or the
  /// new, never a part.
  ///
  /// - Throws: before the rename, with `path` as it was and the hidden file removed; after it
  ///   (only when flushing the folder fails, a failing disk), with the new content in place but
  ///   the rename perhaps not yet on the device.
  package static func replace(
    _ path: String, with bytes: some Collection<UInt8>, mode: UInt32 = 0o600
  ) throws(SystemError) {
    let (folderPath, name) = split(path)
    let folder = try FileDescriptor.open(folderPath, O_RDONLY | O_DIRECTORY)
    var existing = stat()
    let keptMode =
      fstatat(folder.rawValue, name, &existing, 0) == 0 ? existing.st_mode & 0o7777 : mode
    // Unique per writer, so two processes replacing one file never write into each other's copy;
    // the name's start only, so the temporary name stays within NAME_MAX.
    let temporary =
      "." + String(decoding: name.utf8.prefix(200), as: UTF8.self)
      + ".tmp-\(getpid())-\(UInt32.random(in: .min ... .max))"
    let file = try FileDescriptor.open(
      temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: keptMode,
      relativeTo: folder.rawValue)
    do throws(SystemError) {
      // The umask may have narrowed the mode given to open.
      try Syscall.blocking("fchmod") { fchmod(file.rawValue, keptMode) }
      try write(bytes, to: file)
      try file.sync()
      try file.close()
      try Syscall.blocking("renameat") {
        renameat(folder.rawValue, temporary, folder.rawValue, name)
      }
    } catch {
      unlinkat(folder.rawValue, temporary, 0)
      throw error
    }
    try folder.sync()
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

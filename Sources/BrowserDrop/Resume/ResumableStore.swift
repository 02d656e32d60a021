import BrowserDropSystem
import FoundationEssentials
import Glibc

/// Where cut-off uploads wait to be resumed: for each, `<id>.partial` (the bytes so far) and
/// `<id>.record` (path, length, durable offset), in one folder on the staging volume, so that a
/// complete file is renamed into the session folder like any other. Every call blocks (file
/// system, `fdatasync`): run them on the blocking pool.
struct ResumableStore: Sendable {
  /// What is known of one upload; the `.record` file's JSON.
  struct Record: Codable, Sendable, Equatable {
    /// The cleaned relative path.
    var path: String
    /// The whole file's size (the first request's `Content-Length` plus nothing).
    var length: Int
    /// Bytes known to be on the disk: flushed before this was written.
    var offset: Int
    /// The kernel's boot id when the record was written (see `recover`).
    var boot: String
    /// Wall-clock seconds (since 1970) of the last byte received, for expiry across restarts.
    var updated: Double
  }

  /// The folder, created by `prepare`.
  let folder: String

  /// The store of a session (`scope` `.session`: inside its incoming folder) or of a staging
  /// root (`.stagingRoot`: `.browserdrop-resumable` in it, outliving sessions).
  init(staging: StagingFolder, scope: ResumableUploads.Scope) {
    switch scope {
    case .session: folder = staging.incomingPath + "/resumable"
    case .stagingRoot: folder = staging.root.path + "/.browserdrop-resumable"
    }
  }

  /// Creates the folder when missing (private to the user: it holds what people sent).
  func prepare() throws(SystemError) {
    if mkdir(folder, 0o700) != 0, errno != EEXIST { throw SystemError(call: "mkdir", code: errno) }
  }

  func partialPath(_ id: UploadID) -> String { folder + "/" + id.value + ".partial" }
  private func recordPath(_ id: UploadID) -> String { folder + "/" + id.value + ".record" }

  /// Starts an upload afresh (a POST): an empty partial file, replacing any earlier one of that
  /// id, and its record at offset 0. The record is not flushed: until the first `keep`, a power
  /// cut may lose it, and the client then starts again, which is what offset 0 would say.
  func create(_ id: UploadID, _ record: Record) throws(SystemError) -> Int32 {
    let fd = open(
      partialPath(id), O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw SystemError(call: "open", code: errno) }
    do throws(SystemError) {
      try write(record, to: recordPath(id), durably: false)
    } catch {
      close(fd)
      unlink(partialPath(id))
      throw error
    }
    return fd
  }

  /// Opens a kept upload to continue it at `offset` (its durable offset): anything past it is
  /// cut off, and writes go on from there.
  func reopen(_ id: UploadID, at offset: Int) throws(SystemError) -> Int32 {
    let fd = open(partialPath(id), O_RDWR | O_NOFOLLOW | O_CLOEXEC)
    guard fd >= 0 else { throw SystemError(call: "open", code: errno) }
    guard ftruncate(fd, off_t(offset)) == 0, lseek(fd, off_t(offset), SEEK_SET) == off_t(offset)
    else {
      let code = errno
      close(fd)
      throw SystemError(call: "ftruncate", code: code)
    }
    return fd
  }

  /// Makes what arrived durable and records it: `fdatasync`, then the record replaced durably.
  /// Returns the durable offset (the file's size, at most the upload's length).
  func keep(fd: Int32, _ id: UploadID, _ record: Record) throws(SystemError) -> Int {
    try Syscall.blocking("fdatasync") { fdatasync(fd) }
    var info = stat()
    try Syscall.blocking("fstat") { fstat(fd, &info) }
    var record = record
    record.offset = min(Int(info.st_size), record.length)
    record.boot = Self.bootID
    record.updated = Date().timeIntervalSince1970
    try write(record, to: recordPath(id), durably: true)
    return record.offset
  }

  /// Forgets a stored upload's record (its partial file has been renamed into place).
  func removeRecord(_ id: UploadID) {
    unlink(recordPath(id))
  }

  /// Forgets an upload: its partial file (unless already renamed into place) and its record.
  func remove(_ id: UploadID) {
    unlink(partialPath(id))
    unlink(recordPath(id))
  }

  /// The uploads kept here, each with its durable offset; expired, unreadable or orphaned
  /// entries are removed. After a process crash on the same boot the kernel still holds every
  /// byte that was written, so the file's size, once flushed, is durable; after a reboot only
  /// the recorded offset is, and the file is cut back to it.
  func recover(expiresAfter: Duration) -> [(UploadID, Record)] {
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else {
      return []
    }
    let now = Date().timeIntervalSince1970
    let lifetime = Double(expiresAfter.components.seconds)
    let boot = Self.bootID
    var kept: [(UploadID, Record)] = []
    var known = Set<String>()
    for name in names where name.hasSuffix(".record") {
      let stem = name.dropLast(".record".count)
      guard let id = try? UploadID(validating: stem) else {
        unlink(folder + "/" + name)
        continue
      }
      guard let data = FileManager.default.contents(atPath: recordPath(id)),
        var record = try? JSONDecoder().decode(Record.self, from: data),
        now - record.updated < lifetime
      else {
        remove(id)
        continue
      }
      let fd = open(partialPath(id), O_RDWR | O_NOFOLLOW | O_CLOEXEC)
      guard fd >= 0 else {
        remove(id)
        continue
      }
      defer { close(fd) }
      var info = stat()
      guard fstat(fd, &info) == 0 else {
        remove(id)
        continue
      }
      if !boot.isEmpty, record.boot == boot, fdatasync(fd) == 0 {
        record.offset = min(Int(info.st_size), record.length)
      } else {
        record.offset = min(record.offset, Int(info.st_size))
        _ = ftruncate(fd, off_t(record.offset))
      }
      kept.append((id, record))
      known.insert(id.value)
    }
    // Partial files without a record (the record was never written, or lost with a power cut).
    for name in names where name.hasSuffix(".partial") {
      if !known.contains(String(name.dropLast(".partial".count))) { unlink(folder + "/" + name) }
    }
    return kept
  }

  /// The kernel's id for this boot: equal for two processes unless the machine restarted.
  static let bootID: String = {
    guard let data = FileManager.default.contents(atPath: "/proc/sys/kernel/random/boot_id"),
      let text = String(data: data, encoding: .utf8)
    else { return "" }
    return String(text.filter { !$0.isWhitespace })
  }()

  private func write(_ record: Record, to path: String, durably: Bool) throws(SystemError) {
    let bytes = (try? JSONEncoder().encode(record)).map { [UInt8]($0) } ?? []
    if durably {
      try Durable.replace(path, with: bytes)
      return
    }
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw SystemError(call: "open", code: errno) }
    defer { close(fd) }
    let written = bytes.withUnsafeBytes { raw in
      Result { () throws(SystemError) in try BodyTransfer.writeAll(fd, raw) }
    }
    try written.get()
  }
}

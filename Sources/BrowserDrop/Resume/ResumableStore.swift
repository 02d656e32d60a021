import BrowserDropSystem
import FoundationEssentials
import Glibc

/// Where cut-off uploads wait to be resumed: for each, `<id>.partial` (the bytes so far) and
/// `<id>.record` (path, length, durable offset), in one folder on the staging volume, so that a
/// complete file is renamed into the session folder like any other. Every call blocks (file
/// system, `fdatasync`): run them on the blocking pool.
///
/// With the `.stagingRoot` scope the store also remembers uploads that were stored, so that a
/// client that lost its `201` (the process died before sending it) learns from `HEAD` after a
/// restart that nothing is missing. A partial file leaves the store in one way only while its
/// record stays: renamed into the session folder when the upload is stored. Forgetting an
/// upload removes its record first (`remove`). So a record whose partial file is gone is a
/// stored upload, and storing takes no extra write: a crash at any step is safe.
/// 1. The last byte is written and flushed (`fdatasync`). A crash here leaves the record and the
///    whole partial file: a paused upload (never reported complete: see `pausedOffset`).
/// 2. The partial file is renamed into the session folder (one `renameat`), and that folder
///    flushed. A crash from here on leaves the record without its partial file: stored, and the
///    file is in the session folder, which the kiosk makes a batch at its next start.
/// 3. The `201` is sent. The record stays until the upload expires.
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
    /// Set by `recover` for a stored upload (its partial file gone); never written: the
    /// missing partial file is what says so.
    var stored = false

    private enum CodingKeys: String, CodingKey {
      case path, length, offset, boot, updated
    }
  }

  /// The folder, created by `prepare`.
  let folder: String
  /// Whether stored uploads are remembered on the disk (the `.stagingRoot` scope). A `.session`
  /// store ends with its session, so it has nothing to tell a later process.
  let remembersStored: Bool

  /// The store of a session (`scope` `.session`: inside its incoming folder) or of a staging
  /// root (`.stagingRoot`: `.browserdrop-resumable` in it, outliving sessions).
  init(staging: StagingFolder, scope: ResumableUploads.Scope) {
    switch scope {
    case .session: folder = staging.incomingPath + "/resumable"
    case .stagingRoot: folder = staging.root.path + "/.browserdrop-resumable"
    }
    remembersStored = scope == .stagingRoot
  }

  /// Creates the folder when missing (private to the user: it holds what people sent).
  func prepare() throws(SystemError) {
    if mkdir(folder, 0o700) != 0, errno != EEXIST { throw SystemError(call: "mkdir", code: errno) }
  }

  /// Takes the store's lock (`flock` on `.lock` in the folder) for as long as the result lives,
  /// so that a second server on the same staging root cannot remove or rewrite this one's
  /// files. Returns `nil` when another holds it.
  func lock() throws(SystemError) -> StoreLock? {
    let fd = open(folder + "/" + Self.lockName, O_CREAT | O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw SystemError(call: "open", code: errno) }
    guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
      let code = errno
      close(fd)
      if code == EWOULDBLOCK { return nil }
      throw SystemError(call: "flock", code: code)
    }
    return StoreLock(fd: fd)
  }

  /// The lock file's name; it stays in the folder (removing it would let a second server lock
  /// a new file while the first still holds the old one).
  static let lockName = ".lock"

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
      // The partial file was cut to nothing: an earlier upload of this id is gone, and its
      // record must go too, first, or it would read as stored (`remove`).
      close(fd)
      remove(id)
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
    return try recordDurably(id, record, size: try Self.size(of: fd))
  }

  /// Makes what has arrived so far durable while the rest keeps arriving, and records it, so
  /// that after a power cut the upload goes on from here instead of from 0 (a crash on the same
  /// boot needs none of this: the kernel still has every byte written). The size is read before
  /// the flush, so the recorded offset never counts a byte written after the flush began.
  /// Returns the recorded offset.
  @discardableResult
  func checkpoint(fd: Int32, _ id: UploadID, _ record: Record) throws(SystemError) -> Int {
    let size = try Self.size(of: fd)
    try Syscall.blocking("fdatasync") { fdatasync(fd) }
    return try recordDurably(id, record, size: size)
  }

  /// Replaces the record durably with the offset that `size` durable bytes allow
  /// (``pausedOffset(size:length:)``).
  private func recordDurably(
    _ id: UploadID, _ record: Record, size: Int
  ) throws(SystemError)
    -> Int
  {
    var record = record
    record.offset = Self.pausedOffset(size: size, length: record.length)
    record.boot = Self.bootID
    // `updated` is the time of the last byte: a record whose offset did not grow since the one
    // on the disk keeps that one's time, so requests that bring nothing never keep an upload
    // alive (nor, after a restart, its room firm).
    if let previous = recordOnDisk(id), previous.offset >= record.offset {
      record.updated = previous.updated
    } else {
      record.updated = Date().timeIntervalSince1970
    }
    try write(record, to: recordPath(id), durably: true)
    return record.offset
  }

  /// The upload's record as the disk holds it now, if it can be read.
  private func recordOnDisk(_ id: UploadID) -> Record? {
    guard case .success(let (bytes, _)) = readRecord(id) else { return nil }
    return try? JSONDecoder().decode(Record.self, from: Data(bytes))
  }

  private static func size(of fd: Int32) throws(SystemError) -> Int {
    var info = stat()
    try Syscall.blocking("fstat") { fstat(fd, &info) }
    return Int(info.st_size)
  }

  /// Where a paused upload whose partial file holds `size` bytes goes on: at most one byte short
  /// of its length. An offset equal to the length is the answer for a stored upload, and a
  /// client told so sends nothing more; a partial file that holds every byte but was never
  /// renamed into place (a crash between the last byte and the rename) must still be stored, so
  /// its client sends the last byte again and the request that carries it stores the file.
  static func pausedOffset(size: Int, length: Int) -> Int {
    max(0, min(size, length - 1))
  }

  /// Forgets a stored upload's record (its partial file has been renamed into place).
  func removeRecord(_ id: UploadID) {
    unlink(recordPath(id))
  }

  /// Sets the record's modification time to now: the upload was stored, and `recover` counts a
  /// stored upload's lifetime from the later of this and `updated`. Not flushed: a power cut
  /// may lose it, which only shortens how long the upload is remembered.
  func markStored(_ id: UploadID) {
    _ = utimensat(AT_FDCWD, recordPath(id), nil, 0)
  }

  /// Forgets an upload: its record, then its partial file (unless already renamed into place).
  /// In that order, so that a crash in between never leaves a record without its partial file,
  /// which would read as a stored upload.
  func remove(_ id: UploadID) {
    unlink(recordPath(id))
    unlink(partialPath(id))
  }

  /// What a cancelled session removes from a store that outlives it: every paused upload (a
  /// record with its partial file) and the stored uploads of `storedHere` (their files went
  /// with the session folder), and not the stored uploads of earlier sessions, whose files were
  /// handed over. Records first, then partial files, so that a crash part-way never leaves a
  /// record alone for a file that is gone. The folder and its lock stay.
  func removeForCancel(storedHere: Set<UploadID>) {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
    let partials = Set(names.filter { $0.hasSuffix(".partial") }.map { $0.dropLast(8) })
    for name in names where name.hasSuffix(".record") {
      let stem = name.dropLast(".record".count)
      let here = (try? UploadID(validating: stem)).map { storedHere.contains($0) } ?? false
      if partials.contains(stem) || here { unlink(folder + "/" + name) }
    }
    for name in names where name.hasSuffix(".partial") { unlink(folder + "/" + name) }
  }

  /// Removes the store and everything in it (a cancelled session). Every record goes first, so
  /// a crash part-way leaves partial files without records, which the next `recover` removes,
  /// and never a record alone, which would read as an upload that was stored.
  func removeAll() {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
    for name in names where name.hasSuffix(".record") { unlink(folder + "/" + name) }
    try? FileManager.default.removeItem(atPath: folder)
  }

  /// The uploads kept here: paused ones with their durable offset, and stored ones (`stored`
  /// set, `offset` = `length`, the newest `storedLimit`). Expired, unreadable or orphaned entries are removed, and
  /// so are temporary files a crash left behind. After a process crash on the same boot the
  /// kernel still holds every byte that was written, so the file's size, once flushed, is
  /// durable; after a reboot only the recorded offset is, and the file is cut back to it.
  func recover(
    expiresAfter: Duration, storedLimit: Int = ResumeTable.completedMemory
  ) -> [(UploadID, Record)] {
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else {
      return []
    }
    let now = Date().timeIntervalSince1970
    let lifetime = Double(expiresAfter.components.seconds)
    var paused: [(UploadID, Record)] = []
    var stored: [(UploadID, Record)] = []
    var known = Set<String>()
    for name in names where name.hasSuffix(".record") {
      let stem = name.dropLast(".record".count)
      guard let id = try? UploadID(validating: stem) else {
        unlink(folder + "/" + name)
        continue
      }
      let read = readRecord(id)
      if case .failure(let failure) = read {
        // Unreadable for now (out of descriptors, say): kept, with its partial file, for a
        // later start. Gone meanwhile: its partial file, if any, is an orphan.
        if failure.code != ENOENT { known.insert(id.value) }
        continue
      }
      guard case .success(let (data, modified)) = read else { continue }
      guard var record = try? JSONDecoder().decode(Record.self, from: Data(data)) else {
        remove(id)
        continue
      }
      let found: Record
      // An upload past its lifetime goes below: its record is not rewritten first.
      switch recover(id, record, recordsOffset: now - record.updated < lifetime) {
      case .stored:
        // Remembered from when it was stored (`markStored`), if that is later.
        record.updated = max(record.updated, modified)
        record.stored = true
        record.offset = record.length
        found = record
      case .paused(let paused): found = paused
      case .unreadable:
        known.insert(id.value)
        continue
      case .forget:
        remove(id)
        continue
      }
      guard now - found.updated < lifetime else {
        remove(id)
        continue
      }
      if found.stored {
        stored.append((id, found))
      } else {
        paused.append((id, found))
        known.insert(id.value)
      }
    }
    stored.sort { $0.1.updated > $1.1.updated }
    for (id, _) in stored.dropFirst(max(0, storedLimit)) { removeRecord(id) }
    for name in names where !name.hasSuffix(".record") && name != Self.lockName {
      // Partial files without a record (the record was never written, or lost with a power
      // cut), and the hidden temporary file of a replacement a crash cut short (`keep`).
      let orphan = name.hasSuffix(".partial") && !known.contains(String(name.dropLast(8)))
      if orphan || name.hasPrefix(".") { unlink(folder + "/" + name) }
    }
    return paused + stored.prefix(max(0, storedLimit))
  }

  /// What `recover` makes of one record's partial file.
  private enum Recovered {
    /// Gone: renamed into a session folder.
    case stored
    /// Paused, with the offset it can go on from.
    case paused(Record)
    /// There but not openable now (out of descriptors, a permission): left alone.
    case unreadable
    /// To be forgotten (an empty upload, a file that can't be examined).
    case forget
  }

  /// A record's bytes and its modification time, or the `errno` of a failed `open`.
  private func readRecord(_ id: UploadID) -> Result<([UInt8], Double), SystemError> {
    let fd = open(recordPath(id), O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return .failure(SystemError(call: "open", code: errno)) }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0 else { return .failure(SystemError(call: "fstat", code: errno)) }
    var bytes = [UInt8](repeating: 0, count: max(0, Int(info.st_size)))
    var filled = 0
    while filled < bytes.count {
      let count = bytes.withUnsafeMutableBytes { raw in
        read(fd, raw.baseAddress! + filled, raw.count - filled)
      }
      if count < 0, errno == EINTR { continue }
      guard count > 0 else { break }
      filled += count
    }
    let modified = Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
    return .success((Array(bytes[..<filled]), modified))
  }

  /// One record at start, from its partial file (see `Recovered`); `recordsOffset` when an
  /// offset grown since the record was written is to be recorded durably.
  private func recover(_ id: UploadID, _ record: Record, recordsOffset: Bool) -> Recovered {
    var record = record
    let fd = open(partialPath(id), O_RDWR | O_NOFOLLOW | O_CLOEXEC)
    guard fd >= 0 else {
      // Only a partial file that is not there means stored; any other error may pass.
      return errno == ENOENT ? .stored : .unreadable
    }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0, record.length > 0 else { return .forget }
    let boot = Self.bootID
    if !boot.isEmpty, record.boot == boot, fdatasync(fd) == 0 {
      let offset = Self.pausedOffset(size: Int(info.st_size), length: record.length)
      if offset > record.offset && recordsOffset {
        // The bytes are on the disk now: so is the offset, or a power cut before the next
        // checkpoint would send the client back to the record's older one. A record that
        // can't be written keeps that older offset, which is still true.
        var durable = record
        durable.offset = offset
        if (try? write(durable, to: recordPath(id), durably: true)) != nil { record = durable }
      } else {
        record.offset = offset
      }
    } else {
      record.offset = Self.pausedOffset(
        size: min(record.offset, Int(info.st_size)), length: record.length)
      _ = ftruncate(fd, off_t(record.offset))
    }
    return .paused(record)
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

/// The store's lock (`ResumableStore.lock()`), released when this is deinitialized.
final class StoreLock: Sendable {
  private let fd: Int32

  init(fd: Int32) { self.fd = fd }

  deinit { close(fd) }
}

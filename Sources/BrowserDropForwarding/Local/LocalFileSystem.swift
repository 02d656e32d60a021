import BrowserDropSystem
internal import CBrowserDropLinux
import FoundationEssentials
import Glibc

/// A folder on this computer as a ``DestinationFileSystem``. Blocking calls (copying, `fsync`)
/// run on ``DedicatedThread/localIO``.
struct LocalFileSystem: DestinationFileSystem {
  /// Bytes per `copy_file_range` job: large enough to keep the kernel busy, small enough for
  /// timely progress and cancellation.
  static let chunkSize = 64 << 20

  let root: String
  var place: ForwardFailure.Place { .local(directory: root) }
  var restrictsNames: Bool { false }

  private func path(_ relative: RelativePath) -> String {
    relative.isEmpty ? root : root + "/" + relative.joined(separator: "/")
  }

  private func failure(
    _ error: SystemError, _ operation: ForwardFailure.Operation, _ relative: RelativePath
  ) -> ForwardFailure {
    ForwardFailure.from(
      errno: error.code, during: operation, at: place, item: relative.joined(separator: "/"))
  }

  /// Creates the folder and its parents when missing.
  func connect() async throws {
    try await DedicatedThread.localIO.run { [root, place] in
      do {
        try FileManager.default.createDirectory(
          atPath: root, withIntermediateDirectories: true)
      } catch {
        let code = ((error as? CocoaError)?.underlying as? POSIXError)?.code.rawValue
        throw ForwardFailure.from(errno: code ?? EIO, during: .modify, at: place)
      }
    }
  }

  func entry(at relative: RelativePath) async throws -> EntryKind? {
    try await DedicatedThread.localIO.run { [self] in
      var info = stat()
      guard lstat(path(relative), &info) == 0 else {
        if errno == ENOENT { return nil }
        throw failure(.last("lstat"), .inspect, relative)
      }
      return info.st_mode & S_IFMT == S_IFDIR ? .directory : .file(size: Int64(info.st_size))
    }
  }

  func makeDirectory(at relative: RelativePath) async throws -> Bool {
    try await DedicatedThread.localIO.run { [self] in
      guard mkdir(path(relative), 0o755) == 0 else {
        if errno == EEXIST { return false }
        throw failure(.last("mkdir"), .modify, relative)
      }
      try syncDirectory(of: relative)
      return true
    }
  }

  func fileID(at relative: RelativePath) async throws -> FileID? {
    try await DedicatedThread.localIO.run { [self] in
      var info = stat()
      guard lstat(path(relative), &info) == 0 else {
        if errno == ENOENT { return nil }
        throw failure(.last("lstat"), .inspect, relative)
      }
      guard info.st_mode & S_IFMT == S_IFREG else { return nil }
      return FileID(id: UInt64(info.st_ino), size: Int64(info.st_size))
    }
  }

  func upload(
    _ source: SourceFile, to temporary: RelativePath, progress: @Sendable (Int64) async -> Void
  ) async throws -> UInt64 {
    let input = try await Self.openSource(source)
    defer { Glibc.close(input) }
    // The name is this attempt's alone, so it is created exclusively: never opened, truncated
    // or written through if something is there.
    let output = try await DedicatedThread.localIO.run { [self] in
      let fd = Glibc.open(
        path(temporary), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
      guard fd >= 0 else { throw failure(.last("open"), .modify, source.relative) }
      return fd
    }
    do {
      defer { Glibc.close(output) }
      var offset: Int64 = 0
      while true {
        try Task.checkCancellation()
        let copied = try await DedicatedThread.localIO.run { [self, offset] in
          do throws(SystemError) {
            return try Self.copy(from: input, to: output, at: offset, upTo: Self.chunkSize)
          } catch {
            throw failure(error, .transfer, source.relative)
          }
        }
        if copied == 0 { break }
        offset += Int64(copied)
        await progress(offset)
      }
      // The bytes must be durable before the name appears and before the source is removed.
      return try await DedicatedThread.localIO.run { [self] in
        do throws(SystemError) { try Syscall.blocking("fsync") { fsync(output) } } catch {
          throw failure(error, .transfer, source.relative)
        }
        var info = stat()
        guard fstat(output, &info) == 0 else {
          throw failure(.last("fstat"), .transfer, source.relative)
        }
        return UInt64(info.st_ino)
      }
    } catch {
      await removeQuietly(temporary)
      throw error
    }
  }

  /// Copies up to `limit` bytes in the kernel (`sendfile`), falling back to read/write where it
  /// cannot work. Returns 0 at end of file.
  private static func copy(
    from input: Int32, to output: Int32, at offset: Int64, upTo limit: Int
  )
    throws(SystemError) -> Int
  {
    var total = 0
    var inputOffset = off_t(offset)
    guard lseek(output, off_t(offset), SEEK_SET) >= 0 else { throw .last("lseek") }
    while total < limit {
      let count: Int
      do throws(SystemError) {
        count = try Syscall.blocking("sendfile") {
          sendfile(output, input, &inputOffset, limit - total)
        }
      } catch  where [EXDEV, EINVAL, ENOSYS, EOPNOTSUPP, EBADF].contains(error.code) {
        return try total
          + readWrite(from: input, to: output, at: Int64(inputOffset), upTo: limit - total)
      }
      if count == 0 { break }
      total += count
    }
    return total
  }

  private static func readWrite(
    from input: Int32, to output: Int32, at offset: Int64, upTo limit: Int
  )
    throws(SystemError) -> Int
  {
    let buffer = ChunkBuffer(capacity: min(limit, 1 << 20))
    try buffer.fill(from: input, at: offset)
    var written = 0
    while written < buffer.count {
      written += try Syscall.blocking("pwrite") {
        pwrite(
          output, buffer.bytes.baseAddress! + written, buffer.count - written,
          off_t(offset) + off_t(written))
      }
    }
    return buffer.count
  }

  /// False: `renameat2(RENAME_NOREPLACE)` (or `link`) never replaces, no claim is needed.
  var needsClaim: Bool { false }

  /// Never called (``needsClaim`` is false); made as SMB's in-process claim is.
  func claim(
    _ final: RelativePath, recording record: [UInt8], token: [UInt8], in manifest: String,
    trial: ClaimTrial?
  ) async throws -> Bool {
    try await DedicatedThread.localIO.run { [self] in
      let fd = Glibc.open(path(final), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
      guard fd >= 0 else {
        if errno == EEXIST || errno == EISDIR { return false }
        throw failure(.last("open"), .modify, final)
      }
      defer { Glibc.close(fd) }
      if trial == .crashOnceCreated || trial == .crashInProcessOnceCreated {
        throw SimulatedCrash()
      }
      do throws(SystemError) { try Durable.append(record, to: manifest) } catch {
        Glibc.unlink(path(final))  // Not recorded: the one file this attempt knows it made.
        throw ForwardFailure(
          kind: .sourceUnreadable, place: .source, item: Manifest.fileName, errno: error.code)
      }
      _ = token.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
      return true
    }
  }

  func install(
    _ temporary: RelativePath, at final: RelativePath, replacing: Bool, claim: UInt64?
  ) async throws
    -> Bool
  {
    try await DedicatedThread.localIO.run { [self] in
      if replacing {
        guard rename(path(temporary), path(final)) == 0 else {
          throw failure(.last("rename"), .modify, final)
        }
      } else if cbd_renameat2_noreplace(path(temporary), path(final)) != 0 {
        // renameat2(RENAME_NOREPLACE) never overwrites and leaves one name: the name check
        // and the install are one atomic step.
        switch errno {
        case EEXIST: return false
        case EINVAL, ENOSYS:
          // A file system or kernel without RENAME_NOREPLACE: link(2) never overwrites either,
          // but a kill before unlink(2) leaves the file under both names; a resume sees both
          // carry the uploaded file's id and drops the temporary name.
          guard link(path(temporary), path(final)) == 0 else {
            if errno == EEXIST { return false }
            throw failure(.last("link"), .modify, final)
          }
          unlink(path(temporary))
        default:
          throw failure(.last("renameat2"), .modify, final)
        }
      }
      try syncDirectory(of: final)
      return true
    }
  }

  private func syncDirectory(of relative: RelativePath) throws(ForwardFailure) {
    do throws(SystemError) { try Durable.syncFolder(path(Array(relative.dropLast()))) } catch {
      throw failure(error, .modify, relative)
    }
  }

  /// A local rename is carried out before its call returns, and nothing of a killed run is
  /// still on its way: renaming the file aside (never over anything) is all it takes.
  func fence(_ temporary: RelativePath, aside: RelativePath) async throws -> Fence {
    let (from, to) = (path(temporary), path(aside))
    return try await DedicatedThread.localIO.run { () throws(ForwardFailure) -> Fence in
      if access(to, F_OK) == 0 { return .fenced }
      guard cbd_renameat2_noreplace(from, to) != 0 else { return .fenced }
      var code = errno
      // No RENAME_NOREPLACE on this file system: the aside name is free (looked at above) and
      // the attempt's alone.
      if code == EINVAL || code == ENOSYS {
        guard Glibc.rename(from, to) != 0 else { return .fenced }
        code = errno
      }
      if code == ENOENT { return access(to, F_OK) == 0 ? .fenced : .moved }
      throw ForwardFailure.from(
        errno: code, during: .modify, at: place, item: temporary.joined(separator: "/"))
    }
  }

  /// Nothing of a killed run is still on its way locally: settled whenever it is there.
  func isSettled(_ path: RelativePath) async throws -> Bool {
    try await fileID(at: path) != nil
  }

  func removeQuietly(_ relative: RelativePath) async {
    _ = await DedicatedThread.localIO.run { [self] in unlink(path(relative)) }
  }

  /// Read on the local I/O thread, so it runs alongside the source's digest (read ahead).
  func sha256(at relative: RelativePath) async throws -> [UInt8] {
    try await Self.sha256(
      ofFile: path(relative), on: DedicatedThread.localIO,
      failure: { failure($0, .inspect, relative) })
  }

  func leadingBytes(of relative: RelativePath, limit: Int) async throws -> [UInt8]? {
    try await DedicatedThread.localIO.run { [self] () throws(ForwardFailure) -> [UInt8]? in
      let file = Glibc.open(path(relative), O_RDONLY | O_CLOEXEC)
      guard file >= 0 else {
        if errno == ENOENT { return nil }
        throw failure(.last("open"), .inspect, relative)
      }
      defer { Glibc.close(file) }
      var bytes = [UInt8](repeating: 0, count: limit)
      let count = bytes.withUnsafeMutableBytes { Glibc.read(file, $0.baseAddress, $0.count) }
      guard count >= 0 else { throw failure(.last("read"), .inspect, relative) }
      return Array(bytes[..<count])
    }
  }

  /// Nothing to hold: a local call is carried out before it returns, so no request of a run
  /// that was stopped can still happen.
  func holdMarker(_ path: RelativePath) async throws {}

  func isReleased(marker path: RelativePath) async throws -> Bool { true }

  func removeMarker(_ path: RelativePath) async -> Bool {
    await removeQuietly(path)
    return true
  }

  /// Nothing to do: no local run makes a marker.
  func removeReleasedMarkers(except own: RelativePath?, stillHeld: [RelativePath]) async {}

  func close(releasingMarker: Bool) async {}

  // MARK: Source files (shared with the SMB destination)

  /// Opens a source file for reading on the local I/O thread.
  static func openSource(_ source: SourceFile) async throws -> Int32 {
    try await DedicatedThread.localIO.run {
      let fd = Glibc.open(source.absolutePath, O_RDONLY | O_CLOEXEC)
      guard fd >= 0 else {
        throw ForwardFailure(
          kind: .sourceUnreadable, place: .source, item: source.relativeText, errno: errno)
      }
      return fd
    }
  }

  /// Fills `buffer` from a source file on the read-ahead thread.
  static func fill(
    _ buffer: ChunkBuffer, from fd: Int32, at offset: Int64, source: SourceFile
  )
    async throws
  {
    try await DedicatedThread.readAhead.run {
      do throws(SystemError) { try buffer.fill(from: fd, at: offset) } catch {
        throw ForwardFailure(
          kind: .sourceUnreadable, place: .source, item: source.relativeText, errno: error.code)
      }
    }
  }

  /// The SHA-256 digest of a local file, read on `lane` (the read-ahead thread by default).
  static func sha256(
    ofFile path: String, on lane: BlockingPool = DedicatedThread.readAhead,
    failure: @escaping @Sendable (SystemError) -> ForwardFailure
  )
    async throws -> [UInt8]
  {
    try await lane.run {
      let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
      guard fd >= 0 else { throw failure(.last("open")) }
      defer { Glibc.close(fd) }
      let buffer = ChunkBuffer(capacity: 1 << 20)
      guard var digest = SHA256Digest() else {
        throw failure(SystemError(call: "EVP_MD_CTX_new", code: ENOMEM))
      }
      var offset: Int64 = 0
      while true {
        do throws(SystemError) { try buffer.fill(from: fd, at: offset) } catch {
          throw failure(error)
        }
        if buffer.count == 0 { break }
        digest.update(UnsafeRawBufferPointer(rebasing: buffer.bytes[..<buffer.count]))
        offset += Int64(buffer.count)
      }
      return digest.finalize()
    }
  }
}

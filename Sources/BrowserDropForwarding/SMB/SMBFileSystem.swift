import BrowserDropSystem
internal import CSMBClientLoader
import Glibc

/// An SMB share folder as a ``DestinationFileSystem``. Every libsmbclient call runs on
/// ``DedicatedThread/smb``; source files are read ahead on another thread meanwhile.
struct SMBFileSystem: DestinationFileSystem {
  /// Bytes per `smbc_write`. Large writes keep the loopback rate near `smbclient put`'s.
  static let chunkSize = 8 << 20

  private let context: SMBContext
  /// The destination folder inside the share.
  private let root: RelativePath
  let place: ForwardFailure.Place
  var restrictsNames: Bool { true }

  private init(context: SMBContext, root: RelativePath, place: ForwardFailure.Place) {
    self.context = context
    self.root = root
    self.place = place
  }

  /// Loads libsmbclient (`library`, see ``SMBLibrary``) when this is the first SMB delivery,
  /// connects, signs in, and creates the destination folder inside the share when missing.
  static func connect(
    to destination: SMBDestination, library: String = SMBLibrary.defaultName
  ) async throws -> SMBFileSystem {
    let place = ForwardFailure.Place.smb(
      host: destination.host, share: destination.share,
      user: destination.credentials.isGuest ? nil : destination.credentials.username)
    return try await DedicatedThread.smb.run {
      if let reason = SMBLibrary.load(library) {
        throw ForwardFailure(kind: .smbUnavailable, place: place, detail: reason)
      }
      let context: SMBContext
      do throws(SystemError) {
        context = try SMBContext(for: destination)
      } catch {
        throw ForwardFailure.from(errno: error.code, during: .connect, at: place)
      }
      if let (code, log) = context.probeShare() {
        context.free()
        throw ForwardFailure.from(errno: code, during: .connect, at: place, log: log)
      }
      var path: RelativePath = []
      for name in destination.path {
        path.append(name)
        do throws(SystemError) {
          try context.makeDirectory(path)
        } catch  where error.code == EEXIST {
          if let info = try? context.stat(path), info.st_mode & S_IFMT == S_IFDIR { continue }
          context.free()
          throw ForwardFailure(kind: .nameTaken, place: place, item: path.joined(separator: "/"))
        } catch {
          context.free()
          throw ForwardFailure.from(
            errno: error.code, during: .modify, at: place, item: path.joined(separator: "/"))
        }
      }
      return SMBFileSystem(context: context, root: destination.path, place: place)
    }
  }

  private func failure(
    _ error: SystemError, _ operation: ForwardFailure.Operation, _ path: RelativePath
  )
    -> ForwardFailure
  {
    ForwardFailure.from(
      errno: error.code, during: operation, at: place, item: path.joined(separator: "/"))
  }

  func entry(at path: RelativePath) async throws -> EntryKind? {
    try await DedicatedThread.smb.run { [context, root] in
      do throws(SystemError) {
        let info = try context.stat(root + path)
        return info.st_mode & S_IFMT == S_IFDIR ? .directory : .file(size: Int64(info.st_size))
      } catch  where error.code == ENOENT {
        return nil
      } catch {
        throw failure(error, .inspect, path)
      }
    }
  }

  func fileID(at path: RelativePath) async throws -> FileID? {
    try await DedicatedThread.smb.run { [context, root] in
      do throws(SystemError) {
        let info = try context.stat(root + path)
        guard info.st_mode & S_IFMT != S_IFDIR else { return nil }
        // libsmbclient's st_ino is the server's file id (the IndexNumber of SMB2
        // FileInternalInformation; on Samba the inode), and a rename keeps it: checked
        // against smbd 4.17 over SMB2.10 and SMB3.11.
        return FileID(id: UInt64(info.st_ino), size: Int64(info.st_size))
      } catch  where error.code == ENOENT {
        return nil
      } catch {
        throw failure(error, .inspect, path)
      }
    }
  }

  func makeDirectory(at path: RelativePath) async throws -> Bool {
    try await DedicatedThread.smb.run { [context, root] in
      do throws(SystemError) {
        try context.makeDirectory(root + path)
        return true
      } catch  where error.code == EEXIST {
        return false
      } catch {
        throw failure(error, .modify, path)
      }
    }
  }

  /// Files at least this large go over two connections at once: this process writes the even
  /// 8 MiB stripes, a forked child (see ``SMBChildWriter``) the odd ones. `smbc_write` keeps
  /// one request on the wire, so one connection leaves the link idle while the server answers.
  static let splitThreshold: Int64 = 64 << 20

  func upload(
    _ source: SourceFile, to temporary: RelativePath, progress: @Sendable (Int64) async -> Void
  ) async throws -> UInt64 {
    let input = try await LocalFileSystem.openSource(source)
    defer { Glibc.close(input) }
    let file = try await DedicatedThread.smb.run { [context, root] in
      do throws(SystemError) {
        // The name is this attempt's alone: created exclusively, never truncated.
        return try context.open(root + temporary, flags: O_WRONLY | O_CREAT | O_EXCL)
      } catch {
        throw failure(error, .modify, source.relative)
      }
    }
    var closed = false
    var child: SMBChildWriter?
    do {
      if source.size >= Self.splitThreshold, SMBChildWriter.canWaitForChildren {
        // The child opens the file this process just created. When fork fails (no memory or
        // process slots), this process writes everything, as for a small file.
        child = try? await DedicatedThread.smb.run { [context, root] () throws -> SMBChildWriter in
          try SMBChildWriter.start(
            context: context, path: root + temporary, source: input, size: source.size,
            stripeSize: Self.chunkSize, stripe: 1, stripes: 2)
        }
      }
      try await send(source, from: input, to: file, first: 0, every: child == nil ? 1 : 2) {
        sent in
        await progress(sent + (child?.bytesWritten ?? 0))
      }
      if let child {
        let own = ownShare(of: source.size)
        let status = try await wait(for: child, own: own) { await progress($0) }
        if status == ENODATA { throw changed(source) }
        if status != 0 {
          // The child's connection failed (or something killed it): send its stripes from here.
          // Rewriting one it managed is harmless, they hold the same bytes; a fault of the
          // server or the share fails here as well, with the sentence for this connection.
          let reached = child.bytesWritten
          try await send(source, from: input, to: file, first: 1, every: 2) { sent in
            await progress(own + max(sent, reached))
          }
        }
        // A source that grew since the scan would arrive cut short: report it as changed, as
        // the size check after a single connection would.
        var info = Glibc.stat()
        if fstat(input, &info) == 0, Int64(info.st_size) != source.size { throw changed(source) }
        await progress(source.size)
      }
      closed = true
      return try await DedicatedThread.smb.run { [context, root] in
        do throws(SystemError) {
          try context.close(file)
          // The handle's fstat has no id (0): ask by name, now that it is complete.
          return UInt64(try context.stat(root + temporary).st_ino)
        } catch {
          throw failure(error, .transfer, source.relative)
        }
      }
    } catch {
      if let child {
        child.kill()
        await child.exited()
        _ = child.reap()
      }
      if !closed {
        _ = await DedicatedThread.smb.run { [context] in try? context.close(file) }
      }
      if child != nil {
        await removeAfterWriter(temporary)
      } else {
        await removeQuietly(temporary)
      }
      throw error
    }
  }

  /// Writes chunks `first`, `first + every`, `first + 2·every`, … of `input` (all of it when
  /// `every` is 1, up to end of file; otherwise stripes of the scanned size, each after a seek)
  /// through `file`, reading the next chunk ahead while one is on the wire; `progress` gets the
  /// bytes written so far.
  private func send(
    _ source: SourceFile, from input: Int32, to file: SMBFile, first: Int, every: Int,
    progress: (Int64) async -> Void
  ) async throws {
    let striped = every > 1
    let step = Int64(Self.chunkSize * every)
    var current = ChunkBuffer(capacity: Self.chunkSize)
    var spare = ChunkBuffer(capacity: Self.chunkSize)
    var offset = Int64(Self.chunkSize * first)
    if !striped || offset < source.size {
      try await LocalFileSystem.fill(current, from: input, at: offset, source: source)
    }
    var sent: Int64 = 0
    while current.count > 0 {
      try Task.checkCancellation()
      let chunk = current
      let next = spare
      if striped {
        // The scanned size, as the child writes it: a source that shrank is a changed file.
        let expected = Int(min(Int64(Self.chunkSize), source.size - offset))
        guard chunk.count >= expected else { throw changed(source) }
        chunk.count = expected
      }
      // Read the next chunk while this one is on the wire.
      let nextOffset = offset + step
      let readNext = !striped || nextOffset < source.size
      async let readAhead: Void =
        readNext
        ? LocalFileSystem.fill(next, from: input, at: nextOffset, source: source)
        : next.clear()
      try await DedicatedThread.smb.run { [context, offset] in
        do throws(SystemError) {
          if striped { try context.seek(file, to: offset) }
          try context.write(file, UnsafeRawBufferPointer(rebasing: chunk.bytes[..<chunk.count]))
        } catch {
          throw failure(error, .transfer, source.relative)
        }
      }
      try await readAhead
      sent += Int64(chunk.count)
      offset = nextOffset
      await progress(sent)
      (current, spare) = (next, chunk)
    }
  }

  /// Waits for the writer child after this process's own stripes are on the server, reporting
  /// progress (`own`, this process's share, plus the child's bytes) as the child's stripes
  /// arrive; returns its exit status (0 or an errno, see ``SMBChildWriter/reap()``). Throws
  /// `CancellationError` when cancelled (the caller kills the child).
  ///
  /// A child that writes nothing for twice the request timeout plus 5 s (time for a connect,
  /// a sign-in and a stripe, each bounded by libsmbclient) is stuck somewhere no timeout
  /// reaches, e.g. a lock another thread held at the fork: it is killed and counts as failed.
  private func wait(
    for child: SMBChildWriter, own: Int64, progress: (Int64) async -> Void
  ) async throws -> Int32 {
    let stallLimit = context.timeout * 2 + .seconds(5)
    var reported = child.bytesWritten
    var lastChange = ContinuousClock.now
    while !child.hasExited {
      // A short sleep: the child usually ends within a stripe of this process.
      try await Task.sleep(for: .milliseconds(5))
      let now = child.bytesWritten
      if now != reported {
        reported = now
        lastChange = .now
        await progress(own + now)
      } else if ContinuousClock.now - lastChange > stallLimit {
        child.kill()
        await child.exited()
      }
    }
    let status = child.reap()
    try Task.checkCancellation()
    return status
  }

  /// Bytes of a `size`-byte file in this process's (even) stripes.
  private func ownShare(of size: Int64) -> Int64 {
    let chunk = Int64(Self.chunkSize)
    let full = size / chunk
    let evenFull = (full + 1) / 2
    let tail = size % chunk
    // The partial last stripe, number `full`, is ours when `full` is even.
    return evenFull * chunk + (full % 2 == 0 ? tail : 0)
  }

  private func changed(_ source: SourceFile) -> ForwardFailure {
    ForwardFailure(kind: .verificationFailed, place: place, item: source.relativeText)
  }

  /// True: `smbc_rename` replaces. On SMB2/3 it sends a rename without `ReplaceIfExists` and,
  /// when the server answers that the name exists, deletes the target and renames again (two
  /// requests; smbd 4.17's log shows `unlinkat` then `renameat`). So a rename only ever goes
  /// onto a name this attempt has claimed with an exclusive create.
  var needsClaim: Bool { true }

  func claim(_ final: RelativePath) async throws -> Bool {
    try await DedicatedThread.smb.run { [context, root] in
      let claim: SMBFile
      do throws(SystemError) {
        // O_EXCL is atomic on the server (and case-insensitive where the share is).
        claim = try context.open(root + final, flags: O_WRONLY | O_CREAT | O_EXCL)
      } catch  where error.code == EEXIST || error.code == EISDIR {
        return false
      } catch {
        throw failure(error, .modify, final)
      }
      // Created: the caller records that first, then reads its id. A failed close of an empty
      // file loses nothing.
      try? context.close(claim)
      return true
    }
  }

  func install(
    _ temporary: RelativePath, at final: RelativePath, replacing: Bool, claim: UInt64?
  ) async throws
    -> Bool
  {
    try await DedicatedThread.smb.run { [context, root] in
      do throws(SystemError) {
        try context.rename(root + temporary, to: root + final)
        return true
      } catch {
        // libsmbclient deleted the claim and lost the name to another writer before its second
        // rename (EEXIST), or the connection failed. Remove the claim only while it is still
        // this attempt's (its id, empty): if the rename happened with only its answer lost, the
        // file is in place and a resume recognises it by the uploaded file's id.
        if let claim, let info = try? context.stat(root + final),
          UInt64(info.st_ino) == claim, info.st_size == 0
        {
          try? context.unlink(root + final)
        }
        if error.code == EEXIST && !replacing { return false }
        throw failure(error, .modify, final)
      }
    }
  }

  /// Removes a temporary file a killed writer child had open. The server learns of the child's
  /// closed connection a moment after it is gone, and until then refuses the unlink with a
  /// sharing violation (`EBUSY`, seen for 10-20 ms on loopback): retry that for up to 2 s.
  private func removeAfterWriter(_ path: RelativePath) async {
    _ = await DedicatedThread.smb.run { [context, root] in
      for _ in 0..<40 {
        do throws(SystemError) {
          try context.unlink(root + path)
          return
        } catch  where error.code == EBUSY {
          usleep(50_000)
        } catch {
          return
        }
      }
    }
  }

  func removeQuietly(_ path: RelativePath) async {
    _ = await DedicatedThread.smb.run { [context, root] in try? context.unlink(root + path) }
  }

  func sha256(at path: RelativePath) async throws -> [UInt8] {
    let file = try await DedicatedThread.smb.run { [context, root] in
      do throws(SystemError) { return try context.open(root + path, flags: O_RDONLY) } catch {
        throw failure(error, .inspect, path)
      }
    }
    guard var digest = SHA256Digest() else {
      _ = await DedicatedThread.smb.run { [context] in try? context.close(file) }
      throw failure(SystemError(call: "EVP_MD_CTX_new", code: ENOMEM), .inspect, path)
    }
    // The next chunk is read on the SMB thread while this one is hashed.
    let read = { @Sendable [context] (buffer: ChunkBuffer) async throws -> Int in
      try await DedicatedThread.smb.run {
        do throws(SystemError) { return try context.read(file, into: buffer.bytes) } catch {
          throw failure(error, .inspect, path)
        }
      }
    }
    var current = ChunkBuffer(capacity: Self.chunkSize)
    var spare = ChunkBuffer(capacity: Self.chunkSize)
    do {
      var count = try await read(current)
      while count > 0 {
        let next = spare
        async let nextCount = read(next)
        digest.update(UnsafeRawBufferPointer(rebasing: current.bytes[..<count]))
        count = try await nextCount
        (current, spare) = (next, current)
      }
    } catch {
      _ = await DedicatedThread.smb.run { [context] in try? context.close(file) }
      throw error
    }
    _ = await DedicatedThread.smb.run { [context] in try? context.close(file) }
    return digest.finalize()
  }

  func close() async {
    _ = await DedicatedThread.smb.run { [context] in context.free() }
  }
}

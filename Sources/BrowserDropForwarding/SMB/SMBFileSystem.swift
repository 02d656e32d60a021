import BrowserDropSystem
internal import CSMBClientLoader
import Glibc
import Synchronization

/// An SMB share folder as a ``DestinationFileSystem``. Every libsmbclient call runs on
/// ``DedicatedThread/smb``; source files are read ahead on another thread meanwhile.
struct SMBFileSystem: DestinationFileSystem {
  /// Bytes per `smbc_write`. Large writes keep the loopback rate near `smbclient put`'s.
  static let chunkSize = 8 << 20

  let context: SMBContext
  /// The delivery's claim child, started at its first claim and ended by ``close()``.
  let claimChild = SMBClaimChild()
  /// This run's marker, held open from the first claim until ``close(releasingMarker:)``.
  let marker = SMBMarker()
  /// The destination folder inside the share.
  let root: RelativePath
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
          let info: Glibc.stat
          do throws(SystemError) { info = try context.stat(path) } catch {
            // The connection failed in between (or the folder was removed meanwhile): that, not
            // the name, is the failure, and the kiosk tries again.
            context.free()
            throw ForwardFailure.from(
              errno: error.code, during: .inspect, at: place, item: path.joined(separator: "/"))
          }
          if info.st_mode & S_IFMT == S_IFDIR { continue }
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

  func failure(
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

  /// True: `smbc_rename` replaces. On SMB2/3 it sends a rename without `ReplaceIfExists` and,
  /// when the server answers that the name exists, deletes the target and renames again (two
  /// requests; smbd 4.17's log shows `unlinkat` then `renameat`). So a rename only ever goes
  /// onto a name this attempt has claimed with an exclusive create (SMBFileSystem+Claim.swift).
  var needsClaim: Bool { true }

  func install(
    _ temporary: RelativePath, at final: RelativePath, replacing: Bool, claim: UInt64?
  ) async throws
    -> Bool
  {
    try await DedicatedThread.smb.run { [context, root] () throws -> Bool in
      do throws(SystemError) {
        try context.rename(root + temporary, to: root + final)
        return true
      } catch  where error.code == EEXIST && !replacing {
        // libsmbclient answers with its first rename's `EEXIST` (the claim was there) whatever
        // ended its delete of the claim and its second rename: another writer took the name
        // in between, the delete was refused (someone holds the claim open), or the connection
        // failed, maybe after the second rename was carried out. Where the temporary file is
        // now tells which. The claim is not removed here: once libsmbclient has deleted it,
        // another writer's claim at this name can carry its inode number (smbd reuses them).
        do throws(SystemError) {
          _ = try context.stat(root + temporary)
          return false  // Still there: not moved, and the name is not this attempt's.
        } catch  where error.code == ENOENT {
          return true  // Moved, the answer lost: the check proves it by the uploaded id.
        } catch {
          throw MoveAnswerLost(failure: failure(error, .modify, final))
        }
      } catch {
        // The first rename failed without the server answering that the name exists, so
        // libsmbclient neither deleted the claim nor renamed again: the claim is intact. If
        // the rename happened with only its answer lost, the file is in place and a resume
        // recognises it by the uploaded file's id.
        throw failure(error, .modify, final)
      }
    }
  }

  func fence(_ temporary: RelativePath, aside: RelativePath) async throws -> Fence {
    try await DedicatedThread.smb.run { [context, root] () throws -> Fence in
      do throws(SystemError) {
        if !(try Self.exists(root + aside, in: context)) {
          // `smbc_rename` would replace a file at `aside`: there is none, and no one else uses
          // the name.
          do throws(SystemError) {
            try context.rename(root + temporary, to: root + aside)
          } catch  where error.code == ENOENT {
            // Gone from its name; an earlier resume's fence, carried out late, may have put it
            // aside meanwhile.
            guard try Self.exists(root + aside, in: context) else { return .moved }
          } catch  where Self.heldByAnother(error.code) {
            return .stillOpen  // A handle that doesn't share deleting is open on it.
          }
        }
        do throws(SystemError) {
          try context.openSharingReads(root + aside)
        } catch  where Self.heldByAnother(error.code) {
          return .stillOpen
        } catch  where error.code == ENOENT {
          return .moved  // A rename on a handle still open took it between the two steps.
        }
        return .fenced
      } catch  where error.code == EINVAL {
        // libsmbclient's errno for a status its table doesn't name (a deletion waiting for a
        // handle, a lost session): not a name the destination refuses.
        throw ForwardFailure(
          kind: .other, place: place, item: temporary.joined(separator: "/"), errno: error.code)
      } catch {
        throw failure(error, .modify, temporary)
      }
    }
  }

  func isSettled(_ path: RelativePath) async throws -> Bool {
    try await openSharingReads(path) == .granted
  }

  /// What an open of `path` that shares it with readers only met.
  private enum SharedOpen {
    case granted, held, missing
  }

  /// Opens `path` sharing it with readers only, and closes it again.
  private func openSharingReads(_ path: RelativePath) async throws -> SharedOpen {
    try await DedicatedThread.smb.run { [context, root] () throws -> SharedOpen in
      do throws(SystemError) {
        try context.openSharingReads(root + path)
        return .granted
      } catch  where Self.heldByAnother(error.code) {
        return .held
      } catch  where error.code == ENOENT {
        return .missing
      } catch {
        throw failure(error, .inspect, path)
      }
    }
  }

  /// Whether libsmbclient's errno says another handle stands in the way: a sharing violation
  /// (`EBUSY`).
  private static func heldByAnother(_ code: Int32) -> Bool {
    code == EBUSY
  }

  private static func exists(
    _ path: RelativePath, in context: SMBContext
  ) throws(SystemError)
    -> Bool
  {
    do throws(SystemError) {
      _ = try context.stat(path)
      return true
    } catch  where error.code == ENOENT {
      return false
    }
  }

  /// Removes a temporary file a killed writer child had open. The server learns of the child's
  /// closed connection a moment after it is gone, and until then refuses the unlink with a
  /// sharing violation (`EBUSY`, seen for 10-20 ms on loopback): retry that for up to 2 s.
  func removeAfterWriter(_ path: RelativePath) async {
    _ = await removeOnceClosed(path)
  }

  /// An earlier run's marker: its connection may have ended only a moment ago (a killed
  /// kiosk), which the server learns a moment later. Retried the same way.
  func removeMarker(_ path: RelativePath) async -> Bool {
    await removeOnceClosed(path)
  }

  /// Removes `path`, retrying for up to 2 s while the server refuses it with a sharing
  /// violation (a handle of a connection that is ending). True once it is gone (removed, or
  /// not there); false when it is still there or the server could not be asked.
  private func removeOnceClosed(_ path: RelativePath) async -> Bool {
    await DedicatedThread.smb.run { [context, root] () -> Bool in
      for _ in 0..<40 {
        do throws(SystemError) {
          try context.unlink(root + path)
          return true
        } catch  where error.code == EBUSY {
          usleep(50_000)
        } catch {
          return error.code == ENOENT
        }
      }
      return false
    }
  }

  func removeReleasedMarkers(except own: RelativePath?, stillHeld: [RelativePath]) async {
    let key = context.url(root)
    _ = await DedicatedThread.smb.run { [context, root] in
      var entry = MarkerSweeps.take(key)
      entry.held.formUnion(stillHeld.compactMap { $0.count == 1 ? $0[0] : nil })
      var names = entry.held
      // The first delivery of this process into the root lists it once (a big root costs a
      // listing of every entry): markers of earlier processes.
      if !entry.listed, let listed = try? context.fileNames(in: root) {
        names.formUnion(listed.filter(NameRules.isMarkerName))
        entry.listed = true
      }
      if let own, own.count == 1 { names.remove(own[0]) }
      entry.held = []
      for name in names {
        do throws(SystemError) {
          try context.unlink(root + [name])
        } catch  where [ENOENT, EISDIR].contains(error.code) {
          // Gone already (its run, or another delivery, removed it), or a folder.
        } catch {
          entry.held.insert(name)  // held (EBUSY), being deleted, or not asked: next time
        }
      }
      MarkerSweeps.put(key, entry)
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

  func leadingBytes(of path: RelativePath, limit: Int) async throws -> [UInt8]? {
    try await DedicatedThread.smb.run { [context, root] () throws -> [UInt8]? in
      let file: SMBFile
      do throws(SystemError) {
        file = try context.open(root + path, flags: O_RDONLY)
      } catch  where error.code == ENOENT || error.code == EISDIR {
        return nil
      } catch {
        throw failure(error, .inspect, path)
      }
      defer { try? context.close(file) }
      let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: limit, alignment: 1)
      defer { buffer.deallocate() }
      var count = 0
      do throws(SystemError) {
        while count < limit {
          let read = try context.read(
            file, into: UnsafeMutableRawBufferPointer(rebasing: buffer[count...]))
          if read == 0 { break }
          count += read
        }
      } catch {
        throw failure(error, .inspect, path)
      }
      return Array(buffer[..<count])
    }
  }

  func holdMarker(_ path: RelativePath) async throws {
    try await DedicatedThread.smb.run { [context, root, marker] () throws -> Void in
      guard marker.file == nil else { return }
      do throws(SystemError) {
        // Open for writing: the open of isReleased(marker:), which shares only reading, is
        // refused while this handle lasts.
        marker.file = try context.open(root + path, flags: O_RDWR | O_CREAT | O_EXCL)
        marker.path = path
        // Every later request of the run on this connection, or none (see pinConnection).
        context.pinConnection()
      } catch {
        throw failure(error, .modify, path)
      }
    }
  }

  func isReleased(marker path: RelativePath) async throws -> Bool {
    try await openSharingReads(path) != .held
  }

  func close(releasingMarker: Bool) async {
    _ = await DedicatedThread.smb.run { [context, root, claimChild, marker] in
      claimChild.end()
      if releasingMarker, let file = marker.file, let path = marker.path {
        // Every request of this connection has been answered: nothing of this run can happen
        // later. A close that fails means the connection is lost (libsmbclient then drops it,
        // and the removal would go over a new one): the marker stays for the next run, which
        // finds it released once the server has closed the lost connection.
        if (try? context.close(file)) != nil { try? context.unlink(root + path) }
      }
      marker.file = nil
      context.free()
    }
  }
}

/// What this process knows of the markers in the destination roots it delivered into last (by
/// the root's URL): whether it listed the root already, and the markers it found still held
/// there, tried again at its next delivery into that root
/// (``SMBFileSystem/removeReleasedMarkers(except:stillHeld:)``). At most `capacity` roots, the
/// least recently used forgotten first (a kiosk with a batch folder per batch has a root per
/// batch; forgetting one costs a listing at the next delivery into it).
enum MarkerSweeps {
  /// The most roots remembered.
  static let capacity = 64

  /// One root's.
  struct Entry: Sendable {
    /// Whether the root was listed (once per process).
    var listed = false
    /// Markers (names in the root) that refused removal.
    var held: Set<String> = []
  }

  /// The entries, the most recently used root last.
  private static let entries = Mutex<[(root: String, entry: Entry)]>([])

  /// The root's entry, taken out (an empty one the first time).
  static func take(_ root: String) -> Entry {
    entries.withLock { entries in
      guard let index = entries.firstIndex(where: { $0.root == root }) else { return Entry() }
      return entries.remove(at: index).entry
    }
  }

  /// Puts the root's entry back as the most recently used. Taking and putting back happen in
  /// one job on ``DedicatedThread/smb``, one job at a time, so no other entry for the root was
  /// put meanwhile.
  static func put(_ root: String, _ entry: Entry) {
    entries.withLock { entries in
      entries.removeAll { $0.root == root }
      entries.append((root, entry))
      if entries.count > capacity { entries.removeFirst(entries.count - capacity) }
    }
  }
}

/// A run's marker (``DestinationFileSystem/holdMarker(_:)``): the handle held open and its
/// path. `@unchecked Sendable`: used only on ``DedicatedThread/smb``, one job at a time.
final class SMBMarker: @unchecked Sendable {
  var file: SMBFile?
  var path: RelativePath?
}

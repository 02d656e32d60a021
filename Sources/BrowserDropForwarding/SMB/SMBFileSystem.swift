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

  func upload(
    _ source: SourceFile, to temporary: RelativePath, progress: @Sendable (Int64) async -> Void
  ) async throws {
    let input = try await LocalFileSystem.openSource(source)
    defer { Glibc.close(input) }
    let file = try await DedicatedThread.smb.run { [context, root] in
      do throws(SystemError) {
        return try context.open(root + temporary, flags: O_WRONLY | O_CREAT | O_TRUNC)
      } catch {
        throw failure(error, .modify, source.relative)
      }
    }
    var closed = false
    do {
      var current = ChunkBuffer(capacity: Self.chunkSize)
      var spare = ChunkBuffer(capacity: Self.chunkSize)
      try await LocalFileSystem.fill(current, from: input, at: 0, source: source)
      var offset: Int64 = 0
      while current.count > 0 {
        try Task.checkCancellation()
        let chunk = current
        let next = spare
        // Read the next chunk while this one is on the wire.
        let nextOffset = offset + Int64(chunk.count)
        async let readAhead: Void = LocalFileSystem.fill(
          next, from: input, at: nextOffset, source: source)
        try await DedicatedThread.smb.run { [context] in
          do throws(SystemError) {
            try context.write(file, UnsafeRawBufferPointer(rebasing: chunk.bytes[..<chunk.count]))
          } catch {
            throw failure(error, .transfer, source.relative)
          }
        }
        try await readAhead
        offset += Int64(chunk.count)
        await progress(offset)
        (current, spare) = (next, chunk)
      }
      closed = true
      try await DedicatedThread.smb.run { [context] in
        do throws(SystemError) { try context.close(file) } catch {
          throw failure(error, .transfer, source.relative)
        }
      }
    } catch {
      if !closed {
        _ = try? await DedicatedThread.smb.run { [context] in try? context.close(file) }
      }
      await removeQuietly(temporary)
      throw error
    }
  }

  func install(
    _ temporary: RelativePath, at final: RelativePath, replacing: Bool
  ) async throws
    -> Bool
  {
    try await DedicatedThread.smb.run { [context, root] in
      if !replacing {
        // smbc_rename overwrites, so claim the final name first: O_EXCL is atomic on the server
        // (and case-insensitive where the share is).
        do throws(SystemError) {
          let claim = try context.open(root + final, flags: O_WRONLY | O_CREAT | O_EXCL)
          try context.close(claim)
        } catch  where error.code == EEXIST || error.code == EISDIR {
          return false
        } catch {
          throw failure(error, .modify, final)
        }
      }
      do throws(SystemError) {
        try context.rename(root + temporary, to: root + final)
      } catch {
        // Free the claim, but only while it is still empty: if the rename happened and only
        // its answer was lost, the file is in place and a resume accepts it.
        if !replacing, let info = try? context.stat(root + final), info.st_size == 0 {
          try? context.unlink(root + final)
        }
        throw failure(error, .modify, final)
      }
      return true
    }
  }

  /// Never: the server renames in one step, so a file never has two of our names at once.
  func sameFile(_ first: RelativePath, _ second: RelativePath) async throws -> Bool { false }

  func removeQuietly(_ path: RelativePath) async {
    _ = try? await DedicatedThread.smb.run { [context, root] in try? context.unlink(root + path) }
  }

  func sha256(at path: RelativePath) async throws -> [UInt8] {
    let file = try await DedicatedThread.smb.run { [context, root] in
      do throws(SystemError) { return try context.open(root + path, flags: O_RDONLY) } catch {
        throw failure(error, .inspect, path)
      }
    }
    let buffer = ChunkBuffer(capacity: Self.chunkSize)
    var digest = SHA256()
    do {
      while true {
        let count = try await DedicatedThread.smb.run { [context] in
          do throws(SystemError) { return try context.read(file, into: buffer.bytes) } catch {
            throw failure(error, .inspect, path)
          }
        }
        if count == 0 { break }
        digest.update(UnsafeRawBufferPointer(rebasing: buffer.bytes[..<count]))
      }
    } catch {
      _ = try? await DedicatedThread.smb.run { [context] in try? context.close(file) }
      throw error
    }
    _ = try? await DedicatedThread.smb.run { [context] in try? context.close(file) }
    return digest.finalize()
  }

  func close() async {
    _ = try? await DedicatedThread.smb.run { [context] in context.free() }
  }
}

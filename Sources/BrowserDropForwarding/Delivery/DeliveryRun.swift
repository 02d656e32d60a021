import BrowserDropSystem
import FoundationEssentials

/// One call of ``Forwarder/forward(folder:to:policy:verify:progress:)``: walks the scanned
/// folder, recreating it under the destination file by file.
struct DeliveryRun {
  let fileSystem: any DestinationFileSystem
  let policy: CollisionPolicy
  let verify: Verification
  let reportProgress: @Sendable (ForwardProgress) async -> Void
  var manifest: Manifest
  var progress: ForwardProgress
  var delivered: [ForwardReport.Delivered] = []
  var renames: [ForwardReport.Rename] = []
  var resumed = 0
  var bytesSent: Int64 = 0

  /// Delivers every folder and file of `folder` (already scanned) into `destination`.
  mutating func deliver(_ folder: SourceTree.Folder, into destination: RelativePath) async throws {
    for file in folder.files {
      try Task.checkCancellation()
      try await deliver(file, into: destination)
    }
    for child in folder.folders {
      try Task.checkCancellation()
      let target = try await makeFolder(for: child.relative, in: destination)
      try await deliver(child, into: target)
    }
  }

  /// The name `source` gets at the destination before any collision handling.
  private mutating func safeName(for source: RelativePath) -> String {
    let name = source.last!
    guard fileSystem.restrictsNames else { return name }
    return NameRules.windowsSafe(name)
  }

  private func joined(_ path: RelativePath) -> String { path.joined(separator: "/") }

  /// Creates (or merges into) the folder for `source` inside `parent`; returns its path.
  private mutating func makeFolder(
    for source: RelativePath, in parent: RelativePath
  )
    async throws -> RelativePath
  {
    let name = safeName(for: source)
    for number in 1... {
      let candidate = parent + [NameRules.numbered(name, number, isDirectory: true)]
      if try await fileSystem.makeDirectory(at: candidate) == false {
        switch try await fileSystem.entry(at: candidate) {
        case .directory: break  // Merge into it.
        case .file:
          if policy == .fail {
            throw ForwardFailure(kind: .nameTaken, place: fileSystem.place, item: joined(candidate))
          }
          continue
        case nil: continue  // Removed meanwhile: try the same number again would loop; move on.
        }
      }
      recordRename(source, candidate, firstTry: name, number: number, conflict: .kindConflict)
      return candidate
    }
    fatalError("unreachable: 1... is endless")
  }

  private mutating func recordRename(
    _ source: RelativePath, _ target: RelativePath, firstTry name: String, number: Int,
    conflict: ForwardReport.Rename.Reason
  ) {
    let reason: ForwardReport.Rename.Reason? =
      number > 1 ? conflict : (name != source.last! ? .nameNotAllowed : nil)
    if let reason {
      renames.append(.init(source: joined(source), destination: joined(target), reason: reason))
    }
  }

  private mutating func deliver(_ file: SourceFile, into folder: RelativePath) async throws {
    if try await finishedEarlier(file) { return }
    let temporary = folder + [NameRules.temporaryName(for: file.relativeText)]
    let before = progress
    let report = reportProgress
    progress.currentFile = file.relativeText
    await report(progress)
    try await fileSystem.upload(file, to: temporary) { [before] sent in
      var now = before
      now.completedBytes += sent
      now.currentFile = file.relativeText
      await report(now)
    }
    bytesSent += file.size
    let target: RelativePath
    do {
      target = try await install(file, temporary: temporary, in: folder)
      try await check(file, at: target)
    } catch {
      await fileSystem.removeQuietly(temporary)
      throw error
    }
    try await manifest.append(.delivered, source: file, target: target)
    delivered.append(.init(source: file.relativeText, destination: joined(target)))
    progress = before
    progress.completedFiles += 1
    progress.completedBytes += file.size
    progress.currentFile = nil
    await report(progress)
  }

  /// Moves the finished temporary file to its final name according to the policy.
  private mutating func install(
    _ file: SourceFile, temporary: RelativePath, in folder: RelativePath
  )
    async throws -> RelativePath
  {
    let name = safeName(for: file.relative)
    var conflict = ForwardReport.Rename.Reason.nameTaken
    for number in 1... {
      let candidate = folder + [NameRules.numbered(name, number, isDirectory: false)]
      var replacing = false
      if policy != .rename || number == 1 {
        switch try await fileSystem.entry(at: candidate) {
        case .directory:
          if policy == .fail {
            throw ForwardFailure(kind: .nameTaken, place: fileSystem.place, item: joined(candidate))
          }
          conflict = .kindConflict
          continue
        case .file:
          if policy == .fail {
            throw ForwardFailure(kind: .nameTaken, place: fileSystem.place, item: joined(candidate))
          }
          // Only the name itself is replaced; a numbered name after a kind conflict is never.
          replacing = policy == .replace && number == 1
        case nil: break
        }
      }
      try await manifest.append(.installing, source: file, target: candidate)
      if try await fileSystem.install(temporary, at: candidate, replacing: replacing) {
        recordRename(file.relative, candidate, firstTry: name, number: number, conflict: conflict)
        return candidate
      }
      if policy == .fail {
        throw ForwardFailure(kind: .nameTaken, place: fileSystem.place, item: joined(candidate))
      }
    }
    fatalError("unreachable: 1... is endless")
  }

  /// Checks the delivered file's size (and digest when asked) against the source.
  private func check(_ file: SourceFile, at target: RelativePath) async throws {
    guard case .file(let size) = try await fileSystem.entry(at: target), size == file.size else {
      throw ForwardFailure(kind: .verificationFailed, place: fileSystem.place, item: joined(target))
    }
    guard verify == .sha256 else { return }
    let expected = try await LocalFileSystem.sha256(ofFile: file.absolutePath) { error in
      ForwardFailure(
        kind: .sourceUnreadable, place: .source, item: file.relativeText, errno: error.code)
    }
    guard try await fileSystem.sha256(at: target) == expected else {
      throw ForwardFailure(kind: .verificationFailed, place: fileSystem.place, item: joined(target))
    }
  }

  /// Whether an interrupted earlier run already delivered `file`; cleans up what it left behind.
  private mutating func finishedEarlier(_ file: SourceFile) async throws -> Bool {
    guard let record = manifest.latest[file.relativeText], record.size == file.size else {
      return false
    }
    let found = try await fileSystem.entry(at: record.target)
    switch record.state {
    case .delivered:
      guard found == .file(size: file.size) else { return false }
    case .installing:
      // The run stopped between claiming the final name and moving the file there.
      let temporary =
        Array(record.target.dropLast()) + [
          NameRules.temporaryName(for: file.relativeText)
        ]
      var temporaryLeft = try await fileSystem.entry(at: temporary) != nil
      if temporaryLeft, try await fileSystem.sameFile(temporary, record.target) {
        // Stopped between link(2) and unlink(2) of a local install: the file is in place under
        // both names. Drop the temporary one; never write through it (it is the same inode).
        await fileSystem.removeQuietly(temporary)
        temporaryLeft = false
        if found != .file(size: file.size) {
          // Ours, but changed since: remove it and send the file again.
          await fileSystem.removeQuietly(record.target)
          return false
        }
      } else if temporaryLeft, file.size == 0, found == .file(size: 0) {
        // An empty file whose empty claim (SMB) is already what it should be.
        await fileSystem.removeQuietly(temporary)
        temporaryLeft = false
      } else if found == .file(size: 0) && file.size > 0 {
        // Our empty claim: free the name again.
        await fileSystem.removeQuietly(record.target)
        return false
      }
      // A file of the right size with the temporary file still there is someone else's (the
      // stop came before the claim): send ours again.
      guard found == .file(size: file.size), !temporaryLeft else { return false }
      try await manifest.append(.delivered, source: file, target: record.target)
    }
    try await check(file, at: record.target)
    resumed += 1
    delivered.append(.init(source: file.relativeText, destination: joined(record.target)))
    progress.completedFiles += 1
    progress.completedBytes += file.size
    await reportProgress(progress)
    return true
  }
}

import BrowserDropSystem
import FoundationEssentials

/// One call of ``Forwarder/forward(folder:to:policy:verify:progress:)``: walks the scanned
/// folder, recreating it under the destination file by file.
struct DeliveryRun {
  let fileSystem: any DestinationFileSystem
  let policy: CollisionPolicy
  let verify: Verification
  let reportProgress: @Sendable (ForwardProgress) async -> Void
  /// Tests only: where to end as a crash would (``SimulatedCrash``).
  let crashPoint: Checkpoint?
  /// Tests only: see ``Forwarder/beforeClaim``.
  let beforeClaim: (@Sendable () async -> Void)?
  /// Tests only: see ``Forwarder/afterClaim``.
  let afterClaim: (@Sendable () async -> Void)?
  /// Tests only: see ``Forwarder/claimTrial``.
  let claimTrial: ClaimTrial?
  /// Tests only: see ``Forwarder/afterResumeLook``.
  let afterResumeLook: (@Sendable () async -> Void)?
  var manifest: Manifest
  var progress: ForwardProgress
  var delivered: [ForwardReport.Delivered] = []
  var renames: [ForwardReport.Rename] = []
  /// Empty files that may be claims of this delivery's files, each with the id it had when
  /// noted; ``confirmedLeftovers()`` gives the ones still there.
  var possibleLeftovers: [NotedLeftover] = []
  /// What the resume of the file being delivered found to remove; see ``Cleanup``.
  var cleanup = Cleanup()
  var resumed = 0
  var bytesSent: Int64 = 0
  /// This run's marker (SMB), recorded and created at its first claim.
  var marker: RelativePath?
  /// Earlier runs' markers found released (``DestinationFileSystem/isReleased(marker:)``): a
  /// released marker stays released, its connection is gone.
  var releasedMarkers: Set<RelativePath> = []

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

  /// Adds the rename of a file an earlier run delivered under another name than its own (the
  /// number it got, or a name the destination can't hold), as the install would have.
  private mutating func recordResumedRename(_ source: RelativePath, _ target: RelativePath) {
    let name = safeName(for: source)
    let firstTry = NameRules.numbered(name, 1, isDirectory: false)
    let number = target.last == firstTry ? 1 : 2
    recordRename(source, target, firstTry: name, number: number, conflict: .nameTaken)
  }

  /// What a resume found to remove of the latest attempt (its temporary file, its claim where
  /// the records prove it): removed only once the next attempt is recorded, so a resume after a
  /// stop in between never acts on the same records again, when the names may hold another
  /// writer's file that took the freed inode numbers.
  struct Cleanup {
    var temporaries: [RelativePath] = []
    var claims: [RelativePath] = []
    var isEmpty: Bool { temporaries.isEmpty && claims.isEmpty }
  }

  /// A claim noted as a possible leftover, and the id and size it had then.
  struct NotedLeftover {
    var leftover: ForwardReport.PossibleLeftover
    var path: RelativePath
    var found: FileID
  }

  /// How many times a file that arrived different from its source (size, id or SHA-256) is
  /// sent again within one delivery before it fails with `verificationFailed`.
  static let attemptsPerFile = 3

  private mutating func deliver(_ file: SourceFile, into folder: RelativePath) async throws {
    let resumed = manifest.attempts[file.relativeText] != nil
    if try await finishedEarlier(file) { return }
    if resumed { await afterResumeLook?() }
    var cleanup = self.cleanup
    self.cleanup = Cleanup()
    let before = progress
    for attempt in 1...Self.attemptsPerFile {
      do {
        let target = try await deliverOnce(file, into: folder, from: before, cleanup: cleanup)
        cleanup = Cleanup()
        delivered.append(.init(source: file.relativeText, destination: joined(target)))
        break
      } catch let failure as ForwardFailure
        where failure.kind == .verificationFailed && attempt < Self.attemptsPerFile
      {
        cleanup = Cleanup()
        continue  // What this attempt made is gone again; try afresh.
      }
    }
    progress = before
    progress.completedFiles += 1
    progress.completedBytes += file.size
    progress.currentFile = nil
    await reportProgress(progress)
  }

  /// One attempt: a temporary name of its own, recorded before it is created; the upload; the
  /// install under a name that was free; the check. A failure removes only what this attempt
  /// created. `cleanup` (what an earlier attempt left) is removed once this attempt is recorded.
  private mutating func deliverOnce(
    _ file: SourceFile, into folder: RelativePath, from before: ForwardProgress,
    cleanup: Cleanup
  ) async throws -> RelativePath {
    if crashPoint == .beforeNextAttempt, !cleanup.isEmpty { throw SimulatedCrash() }
    let attempt = NameRules.attemptID()
    let temporary = folder + [NameRules.temporaryName(attempt: attempt)]
    try await manifest.append(
      .uploading, source: file, attempt: attempt, temporary: temporary)
    for path in cleanup.temporaries + cleanup.claims { await fileSystem.removeQuietly(path) }
    await settleRemovedClaims(of: file, cleanup.claims)
    let report = reportProgress
    progress = before
    progress.currentFile = file.relativeText
    await report(progress)
    let fileID = try await fileSystem.upload(file, to: temporary) { [before] sent in
      var now = before
      now.completedBytes += sent
      now.currentFile = file.relativeText
      await report(now)
    }
    bytesSent += file.size
    let target: RelativePath
    do {
      target = try await install(
        file, attempt: attempt, temporary: temporary, fileID: fileID, in: folder)
    } catch let error where !(error is SimulatedCrash) {
      await abandon(file, attempt: attempt, temporary: temporary, fileID: fileID)
      throw error
    }
    // Only a check that found other bytes (or another id) gives the attempt up. Any other
    // failure (the connection lost while reading back) leaves the records as they are: the file
    // is in place under this attempt's id, and the resume checks it again and accepts it.
    // Recording `abandoned` there, with the file left in place, would make the resume send it
    // once more under the next free name (seen in the fleet test with an smbd outage).
    do {
      if crashPoint == .checkFails {
        throw ForwardFailure(kind: .connectionLost, place: fileSystem.place, item: joined(target))
      }
      try await check(file, at: target, fileID: fileID)
    } catch let failure as ForwardFailure where failure.kind == .verificationFailed {
      // Only a file that still carries this attempt's id is removed: it is the one it made.
      if await recordAbandoned(file, attempt: attempt, temporary: temporary, fileID: fileID) {
        await removeIfOwn(target, fileID: fileID, size: file.size)
      }
      throw failure
    }
    try await manifest.append(
      .delivered, source: file, target: target, attempt: attempt, fileID: fileID)
    return target
  }

  /// Moves the finished temporary file to its final name according to the policy. Every name
  /// is tried with a move that never replaces (or, where the backend has none, after claiming
  /// the name exclusively), so two writers racing for a name each end up with one of their own.
  private mutating func install(
    _ file: SourceFile, attempt: String, temporary: RelativePath, fileID: UInt64,
    in folder: RelativePath
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
      try await manifest.append(
        .installing, source: file, target: candidate, attempt: attempt, temporary: temporary,
        fileID: fileID)
      if crashPoint == .installingRecorded { throw SimulatedCrash() }
      if crashPoint == .installFails {
        throw ForwardFailure(
          kind: .connectionLost, place: fileSystem.place, item: joined(candidate))
      }
      var claim: UInt64?
      if fileSystem.needsClaim && !replacing {
        let marker = try await heldMarker()
        // Recorded by the create itself, before its id is known: until the next record no
        // rename is tried, so a claim-sized file at this name is this attempt's claim.
        let record = manifest.record(
          .claimed, source: file, target: candidate, attempt: attempt, temporary: temporary,
          fileID: fileID)
        let token = NameRules.claimToken(attempt: attempt)
        await beforeClaim?()
        let claimed: Bool
        do {
          claimed = try await fileSystem.claim(
            candidate, recording: Manifest.line(record), token: token, in: manifest.path,
            trial: trial)
        } catch let lost as ClaimAnswerLost {
          // The create may have happened with its answer lost (the child ended, the request
          // timed out, the connection dropped): said in the manifest, so the resume reports an
          // empty file at this name (never removing it: it can't be told from another's). A
          // definite answer (EACCES, ENOSPC) or a failure before the claim was sent is not.
          try? await manifest.append(
            .unanswered, source: file, target: candidate, attempt: attempt, temporary: temporary,
            fileID: fileID)
          throw lost.failure
        }
        guard claimed else {
          if policy == .fail {
            throw ForwardFailure(kind: .nameTaken, place: fileSystem.place, item: joined(candidate))
          }
          continue
        }
        manifest.noteAppended(record)
        await afterClaim?()
        if crashPoint == .claimRecorded { throw SimulatedCrash() }
        // The name must hold this attempt's token. smbd checks that a rename's target is free
        // and then renames, two steps: another writer's rename can replace a claim created in
        // between (seen in the fleet soak, where an empty file delivered there was taken for
        // the claim, by its size, and deleted by the move). A token write that failed (the
        // claim left empty) proves nothing either: the name is left, as someone else's.
        guard let found = try await fileSystem.fileID(at: candidate),
          try await holdsToken(of: attempt, at: candidate, found: found)
        else {
          continue
        }
        claim = found.id
        try await manifest.append(
          .claimed, source: file, target: candidate, attempt: attempt, temporary: temporary,
          fileID: fileID, claimID: found.id, marker: marker)
      }
      if claim != nil, crashPoint == .killedBeforeMove { throw SimulatedCrash() }
      if claim != nil, crashPoint == .killedBeforeSecondMove {
        if number > 1 { throw SimulatedCrash() }
        continue  // As a move that found the name taken again: the temporary file stays.
      }
      let installed: Bool
      do {
        let lost = MoveAnswerLost(
          failure: .init(kind: .connectionLost, place: fileSystem.place, item: joined(candidate)))
        if claim != nil, crashPoint == .moveAnswerLostBeforeMove { throw lost }
        if claim != nil, crashPoint == .moveRefused { throw lost.failure }
        installed = try await fileSystem.install(
          temporary, at: candidate, replacing: replacing, claim: claim)
        if claim != nil, installed, crashPoint == .moveAnswerLostAfterMove { throw lost }
      } catch let lost as MoveAnswerLost {
        // The claim may be gone, and another writer's claim may carry its id now. Nothing to
        // add: the `claimed` record with the id already says a move may have been sent, so the
        // resume reports an empty file here rather than remove it. The uploaded file's id still
        // proves the move if it happened.
        throw lost.failure
      } catch  where claim != nil {
        // Refused before libsmbclient deleted anything: the claim is still there, and saying so
        // lets the resume remove it by its id.
        try? await manifest.append(
          .moveFailed, source: file, target: candidate, attempt: attempt, temporary: temporary,
          fileID: fileID, claimID: claim)
        throw error
      }
      if !installed, let claim, let found = try? await fileSystem.fileID(at: candidate),
        found.id == claim, NameRules.isClaimSized(found.size)
      {
        // Not moved, and a claim with the claim's id is still there: the claim, which
        // libsmbclient could not delete (someone holds it open), or another writer's claim
        // that got its inode number. Either way not removed; the operator learns of it.
        notePossibleLeftover(of: file, at: candidate, found: found, reason: .claimAnswerLost)
      }
      if installed {
        if crashPoint == .installed { throw SimulatedCrash() }
        recordRename(file.relative, candidate, firstTry: name, number: number, conflict: conflict)
        return candidate
      }
      if policy == .fail {
        throw ForwardFailure(kind: .nameTaken, place: fileSystem.place, item: joined(candidate))
      }
      if claim != nil, !(try await fileSystem.isSettled(temporary)) {
        // libsmbclient's second rename onto this name may still be held by the server (its
        // connection failed after the delete of the claim): moving on to the next name, the
        // file could be taken to both. Given up here; the resume fences it.
        throw ForwardFailure(
          kind: .earlierRequestPending, place: fileSystem.place, item: file.relativeText)
      }
    }
    fatalError("unreachable: 1... is endless")
  }

  /// This run's marker: recorded (`live`), then created and held open at the run's first
  /// claim (``DestinationFileSystem/holdMarker(_:)``).
  private mutating func heldMarker() async throws -> RelativePath {
    if let marker { return marker }
    let path = [NameRules.markerName()]
    try await manifest.appendMarker(path)
    try await fileSystem.holdMarker(path)
    marker = path
    return path
  }

  /// Removes the markers of earlier runs of this folder once it is delivered: each is that
  /// run's alone. One still held open (a connection the server has not closed yet) is refused
  /// and stays; it goes at a later delivery of this process into the same root, once released
  /// (``DestinationFileSystem/removeReleasedMarkers(except:stillHeld:)``), or at the first
  /// delivery into it of a later process, this kiosk's or another's.
  mutating func removeEarlierMarkers() async {
    var stillHeld: [RelativePath] = []
    for path in manifest.markers where path != marker {
      if await !fileSystem.removeMarker(path) { stillHeld.append(path) }
    }
    await fileSystem.removeReleasedMarkers(except: marker, stillHeld: stillHeld)
  }

  /// How the test seams want this claim made.
  private var trial: ClaimTrial? {
    guard crashPoint == .claimCreated else { return claimTrial }
    return claimTrial == .inProcess ? .crashInProcessOnceCreated : .crashOnceCreated
  }

  /// Checks that `target` is still the file this attempt uploaded (its id), of the source's
  /// size, and with `.sha256` that its bytes, read back, hash like the source's.
  private func check(_ file: SourceFile, at target: RelativePath, fileID: UInt64?) async throws {
    let found = try await fileSystem.fileID(at: target)
    guard let found, found.size == file.size, fileID == nil || found.id == fileID else {
      throw ForwardFailure(kind: .verificationFailed, place: fileSystem.place, item: joined(target))
    }
    guard verify == .sha256 else { return }
    // The source on the read-ahead thread while the destination is read back on its own
    // thread: on two cores the two digests take the time of one.
    async let expected = LocalFileSystem.sha256(ofFile: file.absolutePath) { error in
      ForwardFailure(
        kind: .sourceUnreadable, place: .source, item: file.relativeText, errno: error.code)
    }
    let actual = try await fileSystem.sha256(at: target)
    guard try await expected == actual else {
      throw ForwardFailure(kind: .verificationFailed, place: fileSystem.place, item: joined(target))
    }
  }

  /// Gives up this attempt's upload: when its temporary file is still there (so no rename
  /// moved it), records `abandoned` and only then removes it. Once it is gone its id may be
  /// given to another writer's file, which the record keeps a resume from taking for this
  /// attempt's. Without the record (the append failed) the file stays: a resume removes it by
  /// its name, which is the attempt's alone. A file that is gone may have been renamed to the
  /// final name with the answer lost: the id still proves that one, so nothing is recorded.
  /// Once a move may have been sent (a name claimed), the file is fenced first
  /// (``DestinationFileSystem/fence(_:aside:)``), since that move may still be carried out
  /// after any look: only a file the fence holds is given up, and otherwise the resume fences
  /// it again.
  private mutating func abandon(
    _ file: SourceFile, attempt: String, temporary: RelativePath, fileID: UInt64
  ) async {
    if fileSystem.needsClaim, manifest.attempts[file.relativeText]?.moveMayBePending == true {
      let aside = NameRules.aside(of: temporary)
      guard (try? await fileSystem.fence(temporary, aside: aside)) == .fenced,
        await recordAbandoned(file, attempt: attempt, temporary: temporary, fileID: fileID)
      else { return }
      await fileSystem.removeQuietly(aside)
      return
    }
    guard (try? await fileSystem.fileID(at: temporary)) != nil,
      await recordAbandoned(file, attempt: attempt, temporary: temporary, fileID: fileID)
    else { return }
    await fileSystem.removeQuietly(temporary)
  }

  /// Appends `abandoned` for `attempt`; whether it is on disk.
  private mutating func recordAbandoned(
    _ file: SourceFile, attempt: String?, temporary: RelativePath?, fileID: UInt64
  ) async -> Bool {
    do {
      try await manifest.append(
        .abandoned, source: file, attempt: attempt, temporary: temporary, fileID: fileID)
      return true
    } catch {
      return false
    }
  }

  /// Removes `path` only when the file there carries `fileID` (and `size`): proof that this
  /// delivery made it, as long as the attempt has not removed a file of that id before (the
  /// caller records `abandoned` first).
  private func removeIfOwn(_ path: RelativePath, fileID: UInt64, size: Int64?) async {
    guard let found = try? await fileSystem.fileID(at: path), found.id == fileID,
      size == nil || found.size == size
    else { return }
    await fileSystem.removeQuietly(path)
  }

  /// Whether an interrupted earlier run already delivered `file`; cleans up what that run left
  /// behind, as far as it can prove it made it: its temporary file (a name no one else uses),
  /// its claim (the recorded id, still empty), never a file it can't tell from another's.
  private mutating func finishedEarlier(_ file: SourceFile) async throws -> Bool {
    guard let attempt = manifest.attempts[file.relativeText] else { return false }
    if attempt.id == nil {
      // Written by a version before attempts: only its completed deliveries are trusted.
      return try await finishedBeforeAttempts(file, attempt)
    }
    var accepted: RelativePath?
    // A move the interrupted run sent may still be held by a stalled server and carried out
    // after the look below: fenced first, it has either happened (the file is at a name this
    // attempt claimed) or never will (the file is at its aside name).
    let fence = try await fenceMove(of: file, attempt)
    let fenced = fence == .fenced
    // A source that changed size since is sent again, and only a claim of it can be settled:
    // its name is looked at only then, and a look-up that fails leaves the claim as it is
    // (rather than stopping a run that needs nothing else from that name).
    let settlesOnly = attempt.size != file.size
    if let target = attempt.target,
      !settlesOnly || (fileSystem.needsClaim && attempt.claimed && !attempt.delivered)
    {
      let found =
        settlesOnly
        ? try? await fileSystem.fileID(at: target) : try await fileSystem.fileID(at: target)
      // An abandoned attempt removed (or was about to remove) the file of its upload's id:
      // another writer's file may carry that id now, so nothing is accepted by it.
      if !settlesOnly, !attempt.abandoned, let fileID = attempt.fileID,
        found == FileID(id: fileID, size: file.size)
      {
        accepted = target  // The install happened (the rename carries the id).
      } else if !settlesOnly, !fenced, let earlier = try await movedEarlier(file, attempt) {
        // A second rename libsmbclient sent for an earlier name, carried out after the attempt
        // had moved on: the file is there. This name's claim is left, and reported.
        accepted = earlier
        if attempt.claimed, let found, NameRules.isClaimSized(found.size),
          attempt.claimID.map({ $0 == found.id }) ?? true
        {
          notePossibleLeftover(of: file, at: target, found: found, reason: .claimAnswerLost)
        }
      } else if !attempt.delivered, attempt.claimed, let found,
        NameRules.isClaimSized(found.size)
      {
        await settleClaim(of: file, attempt, at: target, found: found, fenced: fenced)
      }
    }
    if let accepted, fence == .moved, !(try await fileSystem.isSettled(accepted)) {
      // Moved, and a handle is still open on it: the rename that moved it may have a sequel
      // (libsmbclient's second rename), or another of its handles may still move it on.
      throw ForwardFailure(
        kind: .earlierRequestPending, place: fileSystem.place, item: file.relativeText)
    }
    if fileSystem.needsClaim {
      let latest = accepted == attempt.target ? nil : attempt.unprovenClaim
      await notePossibleLeftovers(
        of: file, (manifest.unprovenClaims[file.relativeText] ?? []) + (latest.map { [$0] } ?? []))
    }
    // Earlier attempts' temporary names are theirs alone, and their ids are never looked at
    // again: whatever is still there goes now.
    for temporary in manifest.earlierTemporaries[file.relativeText] ?? [] {
      await fileSystem.removeQuietly(temporary)
    }
    if let temporary = attempt.temporary, !attempt.delivered {
      // Gone after a completed rename; a second name of the delivered file after a local
      // link(2) without unlink(2); otherwise the interrupted upload. Its name is the attempt's.
      // Removed now when the file is taken (its inode stays in use at the final name), and
      // otherwise after the next attempt's record (`cleanup`), so that no resume accepts a
      // file by the freed id.
      if accepted != nil {
        await fileSystem.removeQuietly(temporary)
      } else {
        cleanup.temporaries.append(temporary)
        // Where a fence put it (this resume's, an earlier one's, or the run's own give-up).
        cleanup.temporaries.append(NameRules.aside(of: temporary))
      }
    }
    guard let target = accepted, let fileID = attempt.fileID else { return false }
    do {
      try await check(file, at: target, fileID: fileID)
    } catch let failure as ForwardFailure where failure.kind == .verificationFailed {
      if await recordAbandoned(
        file, attempt: attempt.id, temporary: attempt.temporary, fileID: fileID)
      {
        await removeIfOwn(target, fileID: fileID, size: file.size)
      }
      return false
    }
    if !attempt.delivered {
      try await manifest.append(
        .delivered, source: file, target: target, attempt: attempt.id, fileID: fileID)
    }
    resumed += 1
    recordResumedRename(file.relative, target)
    delivered.append(.init(source: file.relativeText, destination: joined(target)))
    progress.completedFiles += 1
    progress.completedBytes += file.size
    await reportProgress(progress)
    return true
  }

  /// Fences a move of the latest attempt's upload that may still be on its way
  /// (``Manifest/Attempt/moveMayBePending``): `.fenced` when the file is now at its aside name,
  /// never to move again, `.moved` when a move took it, nil when no move was sent. Throws
  /// `earlierRequestPending` while a handle of the given-up connection is still open on it:
  /// nothing can be decided, and nothing is sent again, until it closes.
  private func fenceMove(of file: SourceFile, _ attempt: Manifest.Attempt) async throws -> Fence? {
    guard fileSystem.needsClaim, attempt.moveMayBePending, let temporary = attempt.temporary
    else { return nil }
    switch try await fileSystem.fence(temporary, aside: NameRules.aside(of: temporary)) {
    case .fenced: return .fenced
    case .moved: return .moved
    case .stillOpen:
      throw ForwardFailure(
        kind: .earlierRequestPending, place: fileSystem.place, item: file.relativeText)
    }
  }

  /// The earlier name `attempt` claimed where its upload now is (by its id and size), after
  /// the fence found it moved and not at the latest name.
  private func movedEarlier(
    _ file: SourceFile, _ attempt: Manifest.Attempt
  ) async throws -> RelativePath? {
    guard fileSystem.needsClaim, attempt.moveMayBePending, !attempt.abandoned,
      let fileID = attempt.fileID
    else { return nil }
    for earlier in attempt.claimedTargets where earlier != attempt.target {
      if try await fileSystem.fileID(at: earlier) == FileID(id: fileID, size: file.size) {
        return earlier
      }
    }
    return nil
  }

  /// Reports each name of `claims` (earlier attempts' claims of `file` that no record proves)
  /// where an empty file is now: it may be a claim an earlier attempt made, so it stays (it may
  /// as well be another writer's), and the operator learns of it (``ForwardReport``). A name
  /// that can't be read now is not reported.
  ///
  /// The file's id is not compared with the attempt's upload: with no `claimed` record no
  /// rename went onto the name (one the resume took for the delivery is not asked about), and
  /// the id can match by chance: a create the server carried out after the failed attempt
  /// removed its temporary file can get that file's inode number (seen on smbd 4.17).
  private mutating func notePossibleLeftovers(
    of file: SourceFile, _ claims: [Manifest.UnprovenClaim]
  ) async {
    for claim in claims {
      // A claim keeps its inode number while it exists: with its id recorded, an empty file
      // carrying another is not it.
      guard let found = try? await fileSystem.fileID(at: claim.target),
        NameRules.isClaimSized(found.size), claim.claimID.map({ $0 == found.id }) ?? true
      else { continue }
      notePossibleLeftover(
        of: file, at: claim.target, found: found,
        reason: claim.answerLost ? .claimAnswerLost : .claimNotRecorded)
    }
  }

  /// The claim-sized file `found` at the name `attempt` claimed, no move known to have taken
  /// it: removed when the records (or the token and the marker) prove it is the claim and that
  /// nothing can remove it any more, reported when they can't. `fenced`: the fence holds the
  /// upload, so no move of it happened or will.
  private mutating func settleClaim(
    of file: SourceFile, _ attempt: Manifest.Attempt, at target: RelativePath, found: FileID,
    fenced: Bool
  ) async {
    switch attempt.claimID {
    case nil:
      // Recorded by the claim child alone: no move was tried (it comes after the id's record).
      // The claim holds the token unless its write failed; and another writer's rename can
      // have replaced it right after its create (see install), so only the token proves the
      // file the claim. Removed after the next attempt's record: a later resume then only
      // reports the name. Anything else claim-sized is reported, never removed.
      guard let id = attempt.id, (try? await holdsToken(of: id, at: target, found: found)) == true
      else {
        notePossibleLeftover(of: file, at: target, found: found, reason: .claimAnswerLost)
        return
      }
      cleanup.claims.append(target)
    case found.id where attempt.moveFailed:
      // The move was refused before libsmbclient deleted anything: still the claim.
      cleanup.claims.append(target)
    case let claimID:
      // A move may have been sent: libsmbclient may have deleted the claim (and another
      // writer's claim here can carry its inode number), or its delete may still be held by a
      // stalled server.
      guard let marker = attempt.claimMarker, let id = attempt.id else {
        // A claim without the token: only its id tells, which another writer's claim can
        // carry. Reported, never removed.
        if claimID == found.id {
          notePossibleLeftover(of: file, at: target, found: found, reason: .claimAnswerLost)
        }
        return
      }
      guard (try? await holdsToken(of: id, at: target, found: found)) == true else {
        return  // Another writer's claim or file (or unreadable now): not reported.
      }
      // The attempt's own claim. Removed only when nothing of the run that sent the move can
      // still be carried out (its marker released: no late delete of it, no late rename) and
      // the fence holds the upload (or the run's own give-up did); otherwise reported.
      if fenced || attempt.abandoned, await isReleased(marker) {
        cleanup.claims.append(target)
      } else {
        notePossibleLeftover(of: file, at: target, found: found, reason: .claimAnswerLost)
      }
    }
  }

  /// Whether the file `found` at `path` holds the token of `attempt` (read back).
  private func holdsToken(
    of attempt: String, at path: RelativePath, found: FileID
  ) async throws -> Bool {
    let token = NameRules.claimToken(attempt: attempt)
    guard found.size == Int64(token.count) else { return false }
    return try await fileSystem.leadingBytes(of: path, limit: token.count + 1) == token
  }

  /// Whether no connection holds `marker` open any more; a look-up that fails says no. Asked
  /// up to three times, 100 ms and then 400 ms apart: another delivery removing released
  /// markers (``DestinationFileSystem/removeReleasedMarkers(except:stillHeld:)``) holds this
  /// one open for a moment, which would otherwise read as held.
  private mutating func isReleased(_ marker: RelativePath) async -> Bool {
    if releasedMarkers.contains(marker) { return true }
    for pause in [Duration.zero, .milliseconds(100), .milliseconds(400)] {
      if pause > .zero {
        do { try await Task.sleep(for: pause) } catch { return false }
      }
      if (try? await fileSystem.isReleased(marker: marker)) == true {
        releasedMarkers.insert(marker)
        return true
      }
    }
    return false
  }

  /// Reports the claim `found` at `target` as a possible leftover of `file`'s claims, once.
  private mutating func notePossibleLeftover(
    of file: SourceFile, at target: RelativePath, found: FileID,
    reason: ForwardReport.PossibleLeftover.Reason
  ) {
    guard !possibleLeftovers.contains(where: { $0.path == target }) else { return }
    let leftover = ForwardReport.PossibleLeftover(
      source: file.relativeText, path: joined(target), reason: reason)
    possibleLeftovers.append(NotedLeftover(leftover: leftover, path: target, found: found))
  }

  /// After the resume's clean-up: a claim that is gone is recorded `released` (a claim found
  /// there later is not this file's); a claim-sized file still there (the server refused the
  /// removal: someone holds it open) is reported, since no later resume removes it.
  private mutating func settleRemovedClaims(of file: SourceFile, _ removed: [RelativePath]) async {
    for path in removed {
      let found: FileID?
      do { found = try await fileSystem.fileID(at: path) } catch { continue }
      if let found, NameRules.isClaimSized(found.size) {
        notePossibleLeftover(of: file, at: path, found: found, reason: .claimAnswerLost)
      } else {
        try? await manifest.append(.released, source: file, target: path, attempt: nil)
        // Noted this run as an earlier claim's possible leftover: it was this claim, now gone.
        possibleLeftovers.removeAll { $0.path == path }
      }
    }
  }

  /// The possible leftovers still there as noted (same id and size): a name that another
  /// writer's delivery (or rename) has taken since is no longer reported.
  mutating func confirmedLeftovers() async -> [ForwardReport.PossibleLeftover] {
    var confirmed: [ForwardReport.PossibleLeftover] = []
    for noted in possibleLeftovers {
      // A look-up that fails (the connection dropped at the end) keeps the report: the batch
      // and its records go once the run is done, so nothing would report it later.
      let found: FileID?
      do { found = try await fileSystem.fileID(at: noted.path) } catch {
        confirmed.append(noted.leftover)
        continue
      }
      if found == noted.found { confirmed.append(noted.leftover) }
    }
    return confirmed
  }

  /// The resume for records of a version without attempts: a `delivered` file of the right
  /// size is accepted; so is a local file whose install was cut short between link(2) and
  /// unlink(2) (its temporary name, fixed per source path then, is the same file). Anything
  /// else is sent again, under a new name if the old one is taken, and nothing is removed.
  private mutating func finishedBeforeAttempts(
    _ file: SourceFile, _ attempt: Manifest.Attempt
  ) async throws -> Bool {
    guard attempt.size == file.size, let target = attempt.target,
      let found = try await fileSystem.fileID(at: target), found.size == file.size
    else { return false }
    if !attempt.delivered {
      let temporary =
        Array(target.dropLast()) + [NameRules.legacyTemporaryName(for: file.relativeText)]
      guard try await fileSystem.fileID(at: temporary) == found else { return false }
      await fileSystem.removeQuietly(temporary)
      try await manifest.append(
        .delivered, source: file, target: target, attempt: nil, fileID: found.id)
    }
    try await check(file, at: target, fileID: found.id)
    resumed += 1
    recordResumedRename(file.relative, target)
    delivered.append(.init(source: file.relativeText, destination: joined(target)))
    progress.completedFiles += 1
    progress.completedBytes += file.size
    await reportProgress(progress)
    return true
  }
}

import BrowserDropSystem
import FoundationEssentials
import Glibc

/// The record, inside the folder being forwarded, of what has arrived where, so a delivery that
/// was interrupted can be finished without sending a file twice, and without ever taking or
/// removing a file at the destination that it can't prove is its own.
///
/// One JSON object per line, appended and `fsync`ed. Each try at a file is an *attempt* with a
/// random id, and every step is recorded before it is taken:
///
/// * `uploading`: the attempt's temporary name (`.browserdrop-<id>.part`), before it is
///   created. No other writer ever uses that name, so whatever is found there is this
///   attempt's.
/// * `installing`: the uploaded file's server-side id (`st_ino`, which a rename keeps) and the
///   final name about to be tried.
/// * `live` (SMB): the run's marker (``DestinationFileSystem/holdMarker(_:)``), before it is
///   created at its first claim: a later run takes a claim of this run for its own only once
///   no connection holds the marker open (so no request of this run can still be carried
///   out), and removes it when the folder is delivered.
/// * `claimed` (SMB): the empty file created exclusively at that name, recorded by the
///   delivery's claim child that makes the create (it holds an `flock` on this file while it
///   runs, see ``load(folder:destination:)``), then again with its id and the run's marker,
///   once the attempt's token (``NameRules/claimToken(attempt:)``) is written into it, before
///   the temporary file is renamed over it.
/// * `unanswered` (SMB): the claim of the `installing` record's name failed without proof that
///   nothing was created there (its answer was lost, or it timed out): an empty file found at
///   that name later may be this attempt's claim.
/// * `moveFailed` (SMB): the rename over the claim was refused before libsmbclient deleted
///   anything (its first rename failed without `EEXIST`), so the claim is still there and its
///   id proves it. Without this record, a `claimed` record with an id means the move may have
///   been sent: libsmbclient deletes the claim before its second rename, and another writer's
///   claim at the name can then carry the freed inode number, so the resume never removes an
///   empty file there by that id (it reports it).
/// * `abandoned`: the attempt is about to remove what it uploaded (its temporary file, or the
///   file it installed that failed its check). Once that file is gone the server may give its
///   id to another writer's file (smbd 4.17 reuses inode numbers), so from this record on the
///   attempt's ids prove nothing: a resume never accepts or removes a file by them.
/// * `released` (SMB): the claim an earlier attempt made at `target`, which the resume proved
///   its own and has removed: an empty file found there later is not this file's claim.
/// * `delivered`: in place and checked.
///
/// No record says that a resume fenced an attempt's upload (renamed it to
/// `.browserdrop-<id>.aside`, see ``DestinationFileSystem/fence(_:aside:)``): that name, too,
/// is the attempt's alone, and a later resume finds it there.
///
/// Lines for other destinations are kept but ignored. The file has a hidden name and is never
/// forwarded; it goes with the folder.
struct Manifest: Sendable {
  static let fileName = ".browserdrop-forwarded"

  struct Record: Codable, Sendable {
    enum State: String, Codable, Sendable {
      case uploading
      case live
      case installing
      case claimed
      case unanswered
      case moveFailed
      case abandoned
      case released
      case delivered
    }

    var destination: String
    var source: String
    var target: [String]
    var state: State
    var size: Int64
    /// The attempt's random id (absent in records of versions before attempts).
    var attempt: String?
    /// The attempt's temporary file.
    var temporary: [String]?
    /// The uploaded file's server-side id (`installing`, `delivered`).
    var fileID: UInt64?
    /// The id of the claim at `target` (`claimed`).
    var claimID: UInt64?
    /// The marker of the run that recorded the claim's id (`claimed`): present when the claim
    /// holds the attempt's token.
    var marker: [String]?
  }

  /// What the records say about one source file's latest attempt.
  struct Attempt: Sendable {
    var size: Int64
    var id: String?
    var temporary: RelativePath?
    var fileID: UInt64?
    /// The last final name tried (or the one delivered to).
    var target: RelativePath?
    /// Whether a claim at `target` was recorded: made by this attempt's exclusive create.
    var claimed = false
    /// The claim's id; nil for a claim recorded before its id was read (no rename followed).
    var claimID: UInt64?
    /// The marker of the run that recorded the claim's id, when the claim holds the attempt's
    /// token (``NameRules/claimToken(attempt:)``); nil for claims of versions before tokens.
    var claimMarker: RelativePath?
    /// Whether the claim at `target` was sent and failed without an answer that proves nothing
    /// was created (`unanswered`).
    var claimUnanswered = false
    /// Whether the move over the claim at `target` was refused before libsmbclient deleted
    /// anything (`moveFailed`): the claim's id proves an empty file there is the claim.
    var moveFailed = false
    /// Whether the attempt recorded that it removes what it uploaded (`abandoned`): its ids no
    /// longer prove that a file is its own.
    var abandoned = false
    var delivered = false
    /// Every name this attempt claimed with the claim's id recorded, in order: a move of its
    /// upload may have been sent to each (an earlier one's second rename, after libsmbclient's
    /// answer, can still be on its way).
    var claimedTargets: [RelativePath] = []

    /// Whether a move of this attempt's temporary file may have been sent and not been
    /// settled: the resume fences it (``DestinationFileSystem/fence(_:aside:)``) before it
    /// looks at any name.
    var moveMayBePending: Bool {
      !claimedTargets.isEmpty && !delivered && !abandoned && temporary != nil
    }

    /// The claim this attempt recorded at `target`, for when the attempt is left behind (a
    /// later attempt, or a later name of this one): nothing proves any longer what became of
    /// it (a move may have taken it, a resume may have removed it), so an empty file there
    /// carrying its id is reported, never removed.
    var claimLeftBehind: UnprovenClaim? {
      guard let target, claimed, !delivered else { return nil }
      return UnprovenClaim(target: target, answerLost: true, claimID: claimID)
    }

    /// The name this attempt may have created an empty claim at without recording it: its last
    /// `installing` name, when no `claimed` or `delivered` record followed.
    var unprovenClaim: UnprovenClaim? {
      guard let target, !claimed, !delivered else { return nil }
      return UnprovenClaim(target: target, answerLost: claimUnanswered, claimID: nil)
    }
  }

  /// A final name an attempt announced (`installing`) and never recorded as its claim: the
  /// exclusive create may have happened there (its answer lost, or the process or its claim
  /// child stopped before the record) or not (the name was someone else's), and nothing tells
  /// which. An empty file found there is never removed; it is reported as a possible leftover.
  struct UnprovenClaim: Sendable, Equatable {
    var target: RelativePath
    /// The claim was sent and its answer lost (`unanswered`), rather than stopped before it.
    var answerLost: Bool
    /// The claim's id when it was recorded: only an empty file carrying it can be the claim (a
    /// claim keeps its inode number while it exists).
    var claimID: UInt64?
  }

  let path: String
  let destination: String
  /// The latest attempt of each source file for this destination.
  private(set) var attempts: [String: Attempt] = [:]
  /// Per source file, the unproven claims of its earlier attempts (the latest attempt's is
  /// ``Attempt/unprovenClaim``).
  private(set) var unprovenClaims: [String: [UnprovenClaim]] = [:]
  /// Per source file, the temporary names of its earlier attempts that were not delivered.
  private(set) var earlierTemporaries: [String: [RelativePath]] = [:]
  /// The markers of the runs recorded here (``DestinationFileSystem/holdMarker(_:)``), removed
  /// when the folder is delivered.
  private(set) var markers: [RelativePath] = []

  /// Reads the manifest in `folder`, if any.
  ///
  /// Waits first for a shared lock on the file: the claim child of a delivery (SMB, see
  /// ``DestinationFileSystem/claim(_:recording:in:trial:)``) holds an exclusive one from its
  /// start until it exits, which it does only after its last claim is recorded, also when the
  /// process that started it was killed meanwhile, so what it created is never read as
  /// unrecorded. The wait is bounded by the child's own time limit, and cancellable.
  ///
  /// The lane is not held while waiting: the lock is only tried there (`LOCK_NB`), and while it
  /// is taken this task sleeps off the lane (1 ms, doubling up to 50 ms) before trying again, so
  /// other jobs of the lane (another delivery's records) go on meanwhile. `whileLocked` (tests)
  /// runs each time the lock was found taken.
  static func load(
    folder: String, destination: String, whileLocked: (@Sendable () async -> Void)? = nil
  ) async throws -> Manifest {
    let path = folder + "/" + fileName
    var pause = Duration.milliseconds(1)
    while true {
      let read = try await DedicatedThread.localIO.run {
        () throws(ForwardFailure) -> Manifest? in
        try readUnlessLocked(path, destination: destination)
      }
      if let read { return read }
      await whileLocked?()
      try await Task.sleep(for: pause)
      pause = min(pause * 2, .milliseconds(50))
    }
  }

  /// The records at `path` for `destination`, read under a shared lock; nil without reading
  /// when another open file holds the exclusive lock (a claim child).
  private static func readUnlessLocked(
    _ path: String, destination: String
  ) throws(ForwardFailure) -> Manifest? {
    var manifest = Manifest(path: path, destination: destination)
    let file: FileDescriptor
    do throws(SystemError) {
      file = try FileDescriptor.open(path, O_RDONLY | O_CLOEXEC)
    } catch {
      if error.code == ENOENT { return manifest }
      throw ForwardFailure(
        kind: .sourceUnreadable, place: .source, item: fileName, errno: error.code)
    }
    let descriptor = file.rawValue
    do throws(SystemError) {
      guard try Syscall.nonBlocking("flock", { flock(descriptor, LOCK_SH | LOCK_NB) }) != nil
      else { return nil }
    } catch {
      // A file system without flock (ENOLCK, EOPNOTSUPP) is read without waiting.
    }
    let data = FileManager.default.contents(atPath: path) ?? Data()
    try? file.close()
    let decoder = JSONDecoder()
    for line in data.split(separator: UInt8(ascii: "\n")) {
      // A line cut short by a crash is skipped: the step it announced was not taken.
      guard let record = try? decoder.decode(Record.self, from: Data(line)),
        record.destination == destination
      else { continue }
      manifest.apply(record)
    }
    return manifest
  }

  private mutating func apply(_ record: Record) {
    if record.state == .live {
      if !markers.contains(record.target) { markers.append(record.target) }
      return
    }
    if record.state == .released {
      // An earlier attempt's claim, removed by the resume as provably its own: the name is no
      // longer this file's to look at.
      unprovenClaims[record.source]?.removeAll { $0.target == record.target }
      return
    }
    var attempt = attempts[record.source]
    if record.state == .uploading || attempt == nil || attempt?.id != record.attempt {
      // An attempt of a version before attempt ids (nil) never claimed: it renamed with
      // replacement, so its names are not unproven claims.
      if attempt?.id != nil, let unproven = attempt?.unprovenClaim {
        unprovenClaims[record.source, default: []].append(unproven)
      }
      if attempt?.id != nil, let claim = attempt?.claimLeftBehind {
        unprovenClaims[record.source, default: []].append(claim)
      }
      // Its name is the attempt's alone: whatever is still there can go, at any later resume.
      if attempt?.id != nil, attempt?.delivered == false, let temporary = attempt?.temporary {
        earlierTemporaries[record.source, default: []].append(temporary)
        // Where a resume's fence may have moved it.
        earlierTemporaries[record.source, default: []].append(NameRules.aside(of: temporary))
      }
      attempt = Attempt(size: record.size, id: record.attempt)
    }
    guard var attempt else { return }
    attempt.size = record.size
    if let temporary = record.temporary { attempt.temporary = temporary }
    if let fileID = record.fileID { attempt.fileID = fileID }
    switch record.state {
    case .uploading: break
    case .installing:
      // The next name: the claim at the last one stays a name to look at.
      if let claim = attempt.claimLeftBehind, claim.target != record.target {
        unprovenClaims[record.source, default: []].append(claim)
      }
      attempt.target = record.target
      attempt.claimed = false
      attempt.claimID = nil
      attempt.claimMarker = nil
      attempt.claimUnanswered = false
      attempt.moveFailed = false
    case .unanswered:
      attempt.target = record.target
      attempt.claimUnanswered = true
    case .claimed:
      attempt.target = record.target
      attempt.claimed = true
      attempt.claimID = record.claimID
      attempt.claimMarker = record.marker
      if record.claimID != nil, !attempt.claimedTargets.contains(record.target) {
        attempt.claimedTargets.append(record.target)
      }
    case .moveFailed:
      attempt.moveFailed = true
    case .abandoned:
      attempt.abandoned = true
    case .released, .live:
      break  // Applied above: they concern no attempt.
    case .delivered:
      attempt.target = record.target
      attempt.delivered = true
    }
    attempts[record.source] = attempt
  }

  /// The record ``append(_:source:target:attempt:temporary:fileID:claimID:marker:)`` would
  /// write.
  func record(
    _ state: Record.State, source: SourceFile, target: RelativePath = [], attempt: String?,
    temporary: RelativePath? = nil, fileID: UInt64? = nil, claimID: UInt64? = nil,
    marker: RelativePath? = nil
  ) -> Record {
    Record(
      destination: destination, source: source.relativeText, target: target, state: state,
      size: source.size, attempt: attempt, temporary: temporary, fileID: fileID,
      claimID: claimID, marker: marker)
  }

  /// One line of the file: `record` as JSON with sorted keys, and a newline.
  static func line(_ record: Record) throws -> [UInt8] {
    let encoder = JSONEncoder()
    encoder.outputFormatting = .sortedKeys
    var line = Array(try encoder.encode(record))
    line.append(UInt8(ascii: "\n"))
    return line
  }

  /// Takes in a record that was appended to the file by someone else (a claim child).
  mutating func noteAppended(_ record: Record) {
    apply(record)
  }

  /// Appends a record and makes it durable.
  mutating func append(
    _ state: Record.State, source: SourceFile, target: RelativePath = [], attempt: String?,
    temporary: RelativePath? = nil, fileID: UInt64? = nil, claimID: UInt64? = nil,
    marker: RelativePath? = nil
  )
    async throws
  {
    try await append(
      record(
        state, source: source, target: target, attempt: attempt, temporary: temporary,
        fileID: fileID, claimID: claimID, marker: marker))
  }

  /// Appends the `live` record of a run's marker at `path`, before it is created.
  mutating func appendMarker(_ path: RelativePath) async throws {
    try await append(
      Record(
        destination: destination, source: "", target: path, state: .live, size: 0,
        attempt: nil))
  }

  /// Applies `record`, then appends it and makes it durable.
  private mutating func append(_ record: Record) async throws {
    apply(record)
    let path = self.path
    let line = try Self.line(record)
    try await DedicatedThread.localIO.run { [line] () throws(ForwardFailure) in
      do throws(SystemError) { try Durable.append(line, to: path) } catch {
        throw ForwardFailure(
          kind: .sourceUnreadable, place: .source, item: Manifest.fileName, errno: error.code)
      }
    }
  }
}

/// A path under the destination's root, one name per folder level.
typealias RelativePath = [String]

/// A file's server-side id and size: how a delivery recognises a file it made.
struct FileID: Sendable, Equatable {
  var id: UInt64
  var size: Int64
}

/// What occupies a name at the destination.
enum EntryKind: Sendable, Equatable {
  case file(size: Int64)
  case directory
}

/// The operations a delivery needs, implemented for a local folder and for an SMB share.
///
/// Every method runs its blocking calls on a dedicated thread, never on the cooperative pool.
/// Failures are thrown as ``ForwardFailure`` (or `CancellationError` from `upload`).
protocol DestinationFileSystem: Sendable {
  /// Where failures happen, for their wording.
  var place: ForwardFailure.Place { get }
  /// Whether names must follow Windows rules (SMB shares).
  var restrictsNames: Bool { get }
  /// What is at `path`, or nil when nothing is.
  func entry(at path: RelativePath) async throws -> EntryKind?
  /// Creates a folder; false when something already has that name.
  func makeDirectory(at path: RelativePath) async throws -> Bool
  /// The server-side id (`st_ino`, kept by a rename) and size of the file at `path`; nil when
  /// nothing or a folder is there.
  func fileID(at path: RelativePath) async throws -> FileID?
  /// Creates `temporary` exclusively (its name is unique to this attempt), writes `source` to
  /// it, reporting bytes written so far, and returns its id. Removes it again on failure.
  func upload(
    _ source: SourceFile, to temporary: RelativePath,
    progress: @Sendable (Int64) async -> Void
  ) async throws -> UInt64
  /// Whether a final name must be claimed (``claim(_:recording:token:in:trial:)``) before
  /// ``install(_:at:replacing:claim:)`` because the backend has no rename that refuses to
  /// replace (SMB).
  var needsClaim: Bool { get }
  /// Creates an empty file at `final` exclusively and, once it exists, appends `record` (one
  /// line) to the manifest file at `manifest` and flushes it, as one step that a kill of this
  /// process cannot split, then writes `token` into it through the create's own handle (a
  /// failed write leaves it empty): false (nothing created, nothing recorded) when the name is
  /// taken by a file or a folder. Its id and size are read afterwards (``fileID(at:)``).
  /// `trial` is for tests only (``ClaimTrial``).
  func claim(
    _ final: RelativePath, recording record: [UInt8], token: [UInt8], in manifest: String,
    trial: ClaimTrial?
  ) async throws -> Bool
  /// Moves `temporary` to `final`. Unless `replacing`, never replaces anything but this
  /// attempt's own `claim`: false (leaving `temporary` in place, and nothing at `final` that
  /// this attempt made) when the name is taken.
  func install(
    _ temporary: RelativePath, at final: RelativePath, replacing: Bool, claim: UInt64?
  ) async throws
    -> Bool
  /// Makes sure that no move of `temporary` sent earlier (by a run that was killed, or whose
  /// connection was lost) can still be carried out, and tells where the file went. On SMB a
  /// stalled server can carry out a rename long after the client gave up on it, and
  /// libsmbclient renames an open handle, which follows the file to any name: so the file is
  /// first renamed to `aside` (a later open by its old name finds nothing), then opened there
  /// sharing it with readers only, which the server refuses while a handle that may write,
  /// delete or rename it (a rename's handle asks for delete access) is still open on it.
  /// `aside` is this attempt's alone; a file already there (an earlier fence) is checked again.
  func fence(_ temporary: RelativePath, aside: RelativePath) async throws -> Fence
  /// Whether the file at `path` is there with no handle open on it that could still move it
  /// (SMB: an open sharing it with readers only is granted; readers don't count). False when
  /// such a handle is open, or nothing is there.
  func isSettled(_ path: RelativePath) async throws -> Bool
  /// The first bytes (at most `limit`) of the file at `path`; nil when nothing is there.
  func leadingBytes(of path: RelativePath, limit: Int) async throws -> [UInt8]?
  /// Creates this run's marker at `path` (a name of its own, ``NameRules/markerName()``) and
  /// keeps it open for writing on the connection that sends every move and delete of the run,
  /// until ``close(releasingMarker:)``. A stalled server holds the handle open as long as it
  /// may still carry out a request of that connection (it closes a connection's handles only
  /// after its last request), so a later run learns from ``isReleased(marker:)`` that nothing
  /// of this run can happen any more.
  func holdMarker(_ path: RelativePath) async throws
  /// Whether no connection holds the marker at `path` open any more: an open sharing it with
  /// readers only is granted, or nothing is there (the run that made it removed it after its
  /// last request was answered, or was stopped before creating it).
  func isReleased(marker path: RelativePath) async throws -> Bool
  /// Removes an earlier run's marker; while another handle is open on it (its connection
  /// ending, or still held) the server refuses, and it may wait a moment. False when it is
  /// still there.
  func removeMarker(_ path: RelativePath) async -> Bool
  /// Removes the markers in the destination's root folder that no run holds any more, whatever
  /// run (of this kiosk or another) made them, but `own`: `stillHeld` (earlier runs' markers
  /// ``removeMarker(_:)`` could not remove), the ones an earlier delivery of this process into
  /// the same root found held, and, at the first delivery of the process into it, every marker
  /// a listing of the root finds (left by earlier processes). One try each, failures ignored;
  /// one still held is tried again at the next delivery. A marker its run holds refuses
  /// deletion (its handle does not share it), so only released ones go: those that their own
  /// runs' next deliveries could not remove because the server had not yet closed the handle
  /// (a killed run, a lost connection). A later ``isReleased(marker:)`` of a removed one finds
  /// nothing there, which says "released", as it would have before.
  func removeReleasedMarkers(except own: RelativePath?, stillHeld: [RelativePath]) async
  /// Removes a file, ignoring failures: used to clean up after an error.
  func removeQuietly(_ path: RelativePath) async
  /// The SHA-256 digest of a file, read back from the destination.
  func sha256(at path: RelativePath) async throws -> [UInt8]
  /// Releases the connection. With `releasingMarker`, closes this run's marker and removes it
  /// first (refused while another handle is open on it); without it (a test's simulated
  /// crash), the marker stays as a kill would leave it.
  func close(releasingMarker: Bool) async
}

extension DestinationFileSystem {
  /// Releases the connection and this run's marker.
  func close() async { await close(releasingMarker: true) }
}

/// What ``DestinationFileSystem/fence(_:aside:)`` found.
enum Fence: Sendable, Equatable {
  /// The file is at its aside name, and nothing can move it any more: no move of it happened
  /// or will.
  case fenced
  /// Neither name holds it: a move carried it away (to a final name this attempt tried), or
  /// it was removed.
  case moved
  /// At its aside name, but another handle is open on it: a move sent earlier may still take
  /// it. Nothing can be decided until that handle is closed.
  case stillOpen
}

/// How a test wants a claim made.
enum ClaimTrial: Sendable, Equatable {
  /// In this process, without a claim child (as when none can be waited for).
  case inProcess
  /// Ended with ``SimulatedCrash`` as soon as the file exists, as a kill of this process right
  /// after the server's create would end it.
  case crashOnceCreated
  /// In this process (``inProcess``), ended with ``SimulatedCrash`` right after the create and
  /// before its record: a kill there when no claim child can be used.
  case crashInProcessOnceCreated
}

/// A regular file in the folder being forwarded.
struct SourceFile: Sendable {
  /// Absolute path on this computer.
  let absolutePath: String
  /// Path inside the forwarded folder.
  let relative: RelativePath
  /// Size when the folder was scanned.
  let size: Int64

  var relativeText: String { relative.joined(separator: "/") }
}

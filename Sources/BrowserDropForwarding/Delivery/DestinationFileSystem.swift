/// A path under the destination's root, one name per folder level.
typealias RelativePath = [String]

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
  /// Writes `source` to `temporary`, reporting bytes written so far. A leftover file at
  /// `temporary` is replaced, never written through: it may be another name of a delivered file.
  func upload(
    _ source: SourceFile, to temporary: RelativePath,
    progress: @Sendable (Int64) async -> Void
  ) async throws
  /// Moves `temporary` to `final`. Unless `replacing`, fails with false (leaving `temporary` in
  /// place) when the final name is taken; the check and the move are race-free.
  func install(
    _ temporary: RelativePath, at final: RelativePath, replacing: Bool
  ) async throws
    -> Bool
  /// Whether both paths are names of one file (a local install cut short between link(2) and
  /// unlink(2)); false when either is missing, and always on SMB, where a rename is one step.
  func sameFile(_ first: RelativePath, _ second: RelativePath) async throws -> Bool
  /// Removes a file, ignoring failures: used to clean up after an error.
  func removeQuietly(_ path: RelativePath) async
  /// The SHA-256 digest of a file, read back from the destination.
  func sha256(at path: RelativePath) async throws -> [UInt8]
  /// Releases the connection.
  func close() async
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

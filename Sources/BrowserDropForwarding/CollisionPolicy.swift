/// What to do when a file's name is already taken at the destination.
///
/// Folders that already exist are always merged into; the policy applies to each file inside.
/// A file where a folder is (or the reverse) is renamed under ``rename`` and ``replace`` and
/// fails under ``fail``: replacing would destroy a whole folder.
public enum CollisionPolicy: Sendable, Equatable {
  /// Keep both: `report.pdf` arrives as `report 2.pdf`, then `report 3.pdf`…
  case rename
  /// Overwrite the existing file, atomically.
  case replace
  /// Stop with ``ForwardFailure/Kind/nameTaken``.
  case fail
}

/// How each delivered file is checked before the source folder is removed.
public enum Verification: Sendable, Equatable {
  /// Compare the size at the destination with the source's.
  case size
  /// Also read the file back and compare SHA-256 digests.
  case sha256
}

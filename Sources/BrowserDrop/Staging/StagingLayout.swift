package import FoundationEssentials

/// How the library lays out a staging root, for a host that keeps folders of its own beside the
/// sessions (the command's outbox, the folders it keeps) and must tell them apart.
///
/// Each session has `session-<id>/`, which holds its complete files only, laid out as sent, and
/// `.session-<id>.incoming/`, which holds the bodies still arriving. Nothing else in the root is
/// the library's: `BrowserDropServer.removeLeftovers(stagingRoot:)` removes these two kinds and
/// leaves the rest alone.
package enum StagingLayout {
  /// The prefix of a session folder's name: `session-`. A host's own folders in the root must
  /// not start with it, or the next start removes them as a crashed session's leftovers.
  package static var sessionPrefix: String { StagingFolder.sessionPrefix }

  /// Whether `name`, a name in a staging root, is a session folder's (one holding complete
  /// files; an incoming folder's name is hidden and is not).
  package static func isSessionFolder(_ name: String) -> Bool {
    name.hasPrefix(sessionPrefix)
  }

  /// The names in `root` that are session folders', sorted: those of sessions still running,
  /// or left by a crash with complete files. Throws the file system's error when `root` can't
  /// be listed.
  package static func sessionFolderNames(in root: URL) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: root.path).filter(isSessionFolder).sorted()
  }
}

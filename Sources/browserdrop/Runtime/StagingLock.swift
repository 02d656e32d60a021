import FoundationEssentials
import Glibc

/// An exclusive lock on a staging root, held until the process exits, so one command never
/// removes or rescues the folders of another that is still running.
enum StagingLock {
  /// Creates the staging root when missing and takes its lock (`flock` on `.browserdrop.lock`).
  /// Returns `false` when another process holds it; throws when the root can't be created.
  /// The descriptor stays open on purpose: the kernel drops the lock when the process ends,
  /// however it ends.
  static func acquire(root: URL) throws -> Bool {
    try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    let path = root.appending(path: ".browserdrop.lock").path
    let descriptor = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
    guard descriptor >= 0 else {
      throw CocoaError(.fileWriteNoPermission, userInfo: [filePathKey: path])
    }
    guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
      close(descriptor)
      return false
    }
    return true
  }
}

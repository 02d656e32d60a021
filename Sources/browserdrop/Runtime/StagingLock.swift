import FoundationEssentials
import Glibc

/// An exclusive lock on a staging root, held until the process exits, so one command never
/// removes or rescues the folders of another that is still running.
enum StagingLock {
  /// Creates the staging root when missing and takes its lock (`flock` on `.browserdrop.lock`).
  /// Returns `false` when another process holds it; throws when the root can't be created.
  /// The descriptor stays open on purpose: the kernel drops the lock when the process ends,
  /// however it ends.
  static func acquire(root: URL) throws(StartFailure.Staging) -> Bool {
    try makeFolders(root.path)
    let path = root.appending(path: ".browserdrop.lock").path
    let descriptor = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
    guard descriptor >= 0 else {
      throw StartFailure.Staging(path: root.path, code: errno, creating: false)
    }
    guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
      close(descriptor)
      return false
    }
    return true
  }

  /// `mkdir -p`: the missing folders of `path`, parents first; throws the first that fails.
  private static func makeFolders(_ path: String) throws(StartFailure.Staging) {
    var status = stat()
    if stat(path, &status) == 0 {
      guard status.st_mode & S_IFMT == S_IFDIR else {
        throw StartFailure.Staging(path: path, code: ENOTDIR, creating: true)
      }
      return
    }
    var trimmed = Substring(path)
    while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed.removeLast() }
    if let slash = trimmed.lastIndex(of: "/"), slash != trimmed.startIndex {
      try makeFolders(String(trimmed[..<slash]))
    }
    guard mkdir(path, 0o755) == 0 || errno == EEXIST else {
      throw StartFailure.Staging(path: path, code: errno, creating: true)
    }
  }
}

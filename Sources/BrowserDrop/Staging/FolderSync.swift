import BrowserDropSystem
import FoundationEssentials
import Glibc
import Synchronization

/// Makes renames durable by flushing their folders, with group commit: an upload that needs a
/// folder flushed joins the next `fsync` of it, so uploads finishing together share one flush
/// instead of queueing one each. A flush only covers renames made before it started, so a
/// request arriving while one runs waits for the next.
final class FolderSync: Sendable {
  private struct Folder {
    var flushing = false
    var waiting: [CheckedContinuation<Bool, Never>] = []
  }

  private let folders = Mutex<[String: Folder]>([:])
  private let pool: BlockingPool

  init(pool: BlockingPool = .shared) {
    self.pool = pool
  }

  /// Returns once every folder in `paths` has been flushed after this call began: `false` when
  /// a flush failed (the disk reported an error), so the renames may not survive a power cut.
  func flush(_ paths: some Collection<String>) async -> Bool {
    var flushed = true
    for path in Set(paths) where await !flush(path) { flushed = false }
    return flushed
  }

  private func flush(_ path: String) async -> Bool {
    await withCheckedContinuation { continuation in
      let start = folders.withLock { folders in
        folders[path, default: Folder()].waiting.append(continuation)
        guard !folders[path]!.flushing else { return false }
        folders[path]!.flushing = true
        return true
      }
      if start { pool.submit { self.drain(path) } }
    }
  }

  /// Flushes `path` for everyone waiting, again while new waiters arrived meanwhile.
  private func drain(_ path: String) {
    while true {
      let batch = folders.withLock { folders -> [CheckedContinuation<Bool, Never>] in
        let batch = folders[path]?.waiting ?? []
        if batch.isEmpty {
          folders.removeValue(forKey: path)
        } else {
          folders[path]!.waiting = []
        }
        return batch
      }
      guard !batch.isEmpty else { return }
      let flushed = (try? Durable.syncFolder(path)) != nil
      for continuation in batch { continuation.resume(returning: flushed) }
    }
  }
}

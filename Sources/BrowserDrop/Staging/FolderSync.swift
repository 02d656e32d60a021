import BrowserDropSystem
import FoundationEssentials
import Glibc
import Synchronization

/// Makes uploads durable with group commit: data flushes of uploads finishing together run side
/// by side on the I/O threads, so the device merges their cache flushes, and an upload that needs
/// a folder flushed joins the next `fsync` of it, so uploads finishing together share one flush
/// instead of queueing one each. A folder flush only covers names made before it started, so a
/// request arriving while one runs waits for the next.
///
/// The order for one upload stays: its data (`fdatasync`), then its name (`linkat`/`rename`, by
/// the caller), then the folders whose entries changed; its 201 waits for all three.
final class FolderSync: Sendable {
  private struct Folder {
    var flushing = false
    var waiting: [CheckedContinuation<Bool, Never>] = []
  }

  /// The flushes themselves: the system's, or a test's stand-in that records their order or
  /// fails some of them.
  struct Operations: Sendable {
    /// Flushes the data of the open file `fd`, an upload to `label` (its path, for a test).
    var syncData: @Sendable (_ fd: Int32, _ label: String) -> SystemError?
    /// Flushes the folder at `path`.
    var syncFolder: @Sendable (_ path: String) -> SystemError?

    static let system = Operations(
      syncData: { fd, _ in fdatasync(fd) == 0 ? nil : SystemError(call: "fdatasync", code: errno) },
      syncFolder: { path in
        do throws(SystemError) {
          try Durable.syncFolder(path)
          return nil
        } catch {
          return error
        }
      })
  }

  private let folders = Mutex<[String: Folder]>([:])
  /// Folders made for uploads whose names may not be durable yet: the flush of their parent
  /// after they were made has not completed.
  private let unflushedFolders = Mutex<Set<String>>([])
  private let pool: BlockingPool
  private let fixedOperations: Operations?

  /// `operations` replaces the system's flushes (a test); by default a test's stand-in
  /// registered for the folder (``replaceOperationsForTesting(under:with:)``) is used, else the
  /// system's.
  init(pool: BlockingPool = .shared, operations: Operations? = nil) {
    self.pool = pool
    self.fixedOperations = operations
  }

  /// Makes a stored file's name durable: flushes every folder whose entries changed for it, and
  /// the parent of every folder above it whose own name is not known to be durable yet (made by
  /// another upload whose flush has not completed, or failed). Without that, an upload into a
  /// folder another upload just made could get its 201 while the folder itself would not survive
  /// a power cut. Returns `false` when a flush failed.
  func flush(_ placement: StagingFolder.Placement, under sessionFolder: String) async -> Bool {
    var toFlush = Set(placement.changed)
    unflushedFolders.withLock { unflushed in
      var folder = placement.folder
      while folder.utf8.count > sessionFolder.utf8.count, let slash = folder.lastIndex(of: "/") {
        let parent = String(folder[..<slash])
        if unflushed.contains(folder) { toFlush.insert(parent) }
        folder = parent
      }
    }
    let flushed = await flush(toFlush)
    if flushed && !placement.created.isEmpty {
      // Their parents were flushed after they were made.
      unflushedFolders.withLock { $0.subtract(placement.created) }
    }
    return flushed
  }

  /// Notes a folder just made for an upload (by the server actor, in the same step as the
  /// `mkdir`, so no other upload can use it before it is known to be unflushed).
  func noteMade(_ folder: String) {
    _ = unflushedFolders.withLock { $0.insert(folder) }
  }

  /// Returns once every folder in `paths` has been flushed after this call began: `false` when
  /// a flush failed (the disk reported an error), so the renames may not survive a power cut.
  /// A failed flush fails only the uploads waiting for it. Several folders flush at once.
  func flush(_ paths: Set<String>) async -> Bool {
    if paths.count == 1, let path = paths.first { return await flush(path) }
    return await withTaskGroup(of: Bool.self) { group in
      for path in paths { group.addTask { await self.flush(path) } }
      return await group.reduce(true) { $0 && $1 }
    }
  }

  private func flush(_ path: String) async -> Bool {
    await withCheckedContinuation { continuation in
      let start = folders.withLock { folders in
        folders[path, default: Folder()].waiting.append(continuation)
        guard !folders[path]!.flushing else { return false }
        folders[path]!.flushing = true
        return true
      }
      if start {
        let operations = operations(for: path)
        pool.submit { self.drain(path, operations) }
      }
    }
  }

  /// Flushes `path` for everyone waiting, again while new waiters arrived meanwhile.
  private func drain(_ path: String, _ operations: Operations) {
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
      let flushed = operations.syncFolder(path) == nil
      for continuation in batch { continuation.resume(returning: flushed) }
    }
  }

  // MARK: - Test seam

  /// How many uploads wait for a flush of `path` that has not started yet.
  func waitingCount(_ path: String) -> Int {
    folders.withLock { $0[path]?.waiting.count ?? 0 }
  }

  /// Stand-ins registered by tests, by the folder under which they apply (a test's own staging
  /// root), so tests running at once in one process never see each other's.
  private static let testOperations = Mutex<[String: Operations]>([:])
  private static let hasTestOperations = Atomic(false)

  /// Makes every session whose folders lie under `root` flush through `operations` instead of
  /// the system's calls, until ``removeOperationsForTesting(under:)``.
  static func replaceOperationsForTesting(under root: String, with operations: Operations) {
    testOperations.withLock { $0[root] = operations }
    hasTestOperations.store(true, ordering: .releasing)
  }

  /// Ends what ``replaceOperationsForTesting(under:with:)`` began.
  static func removeOperationsForTesting(under root: String) {
    testOperations.withLock {
      $0[root] = nil
      hasTestOperations.store(!$0.isEmpty, ordering: .releasing)
    }
  }

  /// The flushes for the folder at `path` and the uploads into it.
  func operations(for path: String) -> Operations {
    if let fixedOperations { return fixedOperations }
    guard Self.hasTestOperations.load(ordering: .acquiring) else { return .system }
    return Self.testOperations.withLock { standIns in
      standIns.first { path.hasPrefix($0.key + "/") }?.value
    } ?? .system
  }
}

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
/// the caller), then the folders whose entries changed; its 201 waits for all three. All three
/// happen in one trip to the I/O threads (`UploadReceiver+Durable.swift`): the thread that made
/// the name joins the folder's flush (``join(_:under:then:)``), running it itself when none is
/// running.
final class FolderSync: Sendable {
  private struct Folder {
    var flushing = false
    var waiting: [@Sendable (Bool) -> Void] = []
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

  /// A folder made for an upload, and which making of it: a folder removed (by the operator)
  /// and made again by another upload is a new generation, which a flush covering only the
  /// first one must not mark durable.
  struct MadeFolder: Sendable, Equatable {
    var path: String
    var generation: UInt64
  }

  private struct Unflushed {
    /// Folders made for uploads whose names may not be durable yet (the flush of their parent
    /// after they were made has not completed), with the generation of their latest making.
    var generations: [String: UInt64] = [:]
    var nextGeneration: UInt64 = 1
  }

  private let folders = Mutex<[String: Folder]>([:])
  private let unflushed = Mutex(Unflushed())
  private let pool: BlockingPool
  private let fixedOperations: Operations?

  /// `operations` replaces the system's flushes (a test); by default a test's stand-in
  /// registered for the folder (``replaceOperationsForTesting(under:with:)``) is used, else the
  /// system's.
  init(pool: BlockingPool = .shared, operations: Operations? = nil) {
    self.pool = pool
    self.fixedOperations = operations
  }

  /// Notes a folder just made for an upload (by the server actor, in the same step as the
  /// `mkdir`, so no other upload can use it before it is known to be unflushed). The upload
  /// keeps what it returns in its `Placement.created`.
  @discardableResult
  func noteMade(_ folder: String) -> MadeFolder {
    unflushed.withLock { state in
      let generation = state.nextGeneration
      state.nextGeneration += 1
      state.generations[folder] = generation
      return MadeFolder(path: folder, generation: generation)
    }
  }

  /// Makes a stored file's name durable: flushes every folder whose entries changed for it, and
  /// the parent of every folder above it whose own name is not known to be durable yet (made by
  /// another upload whose flush has not completed, or failed). Without that, an upload into a
  /// folder another upload just made could get its 201 while the folder itself would not survive
  /// a power cut. Returns `false` when a flush failed.
  func flush(_ placement: StagingFolder.Placement, under sessionFolder: String) async -> Bool {
    await withCheckedContinuation { continuation in
      join(placement, under: sessionFolder, flushingHere: false) {
        continuation.resume(returning: $0)
      }
    }
  }

  /// ``flush(_:under:)`` for the I/O thread that just gave the file its name: `done` hears the
  /// outcome, on whichever I/O thread runs the flush that covers it. When no flush of a folder
  /// is running, this thread runs it (for everyone waiting by then), so an upload makes one trip
  /// to the I/O threads in all; when one is running, this returns at once and the next round
  /// covers it.
  func join(
    _ placement: StagingFolder.Placement, under sessionFolder: String,
    then done: @escaping @Sendable (Bool) -> Void
  ) {
    join(placement, under: sessionFolder, flushingHere: true, done)
  }

  private func join(
    _ placement: StagingFolder.Placement, under sessionFolder: String, flushingHere: Bool,
    _ done: @escaping @Sendable (Bool) -> Void
  ) {
    var toFlush = Set(placement.changed)
    unflushed.withLock { state in
      var folder = placement.folder
      while folder.utf8.count > sessionFolder.utf8.count, let slash = folder.lastIndex(of: "/") {
        let parent = String(folder[..<slash])
        if state.generations[folder] != nil { toFlush.insert(parent) }
        folder = parent
      }
    }
    let created = placement.created
    enqueue(toFlush, flushingHere: flushingHere) { flushed in
      if flushed && !created.isEmpty {
        // Their parents were flushed after they were made; a folder made again since (another
        // generation) is not covered.
        self.unflushed.withLock { state in
          for made in created where state.generations[made.path] == made.generation {
            state.generations[made.path] = nil
          }
        }
      }
      done(flushed)
    }
  }

  /// Returns once every folder in `paths` has been flushed after this call began: `false` when
  /// a flush failed (the disk reported an error), so the renames may not survive a power cut.
  /// A failed flush fails only the uploads waiting for it. Several folders flush at once.
  func flush(_ paths: Set<String>) async -> Bool {
    await withCheckedContinuation { continuation in
      enqueue(paths, flushingHere: false) { continuation.resume(returning: $0) }
    }
  }

  /// Registers `done` for the next flush of each of `paths` and starts the flushes nobody runs
  /// yet: on the pool, or the last of them on this thread when `flushingHere`. `done` is
  /// called once, `false` when any of the flushes failed.
  private func enqueue(
    _ paths: Set<String>, flushingHere: Bool, _ done: @escaping @Sendable (Bool) -> Void
  ) {
    guard !paths.isEmpty else { return done(true) }
    let hear: @Sendable (Bool) -> Void
    if paths.count == 1 {
      hear = done
    } else {
      let tally = Tally(paths.count)
      hear = { flushed in
        if let outcome = tally.count(flushed) { done(outcome) }
      }
    }
    var toStart: [String] = []
    for path in paths {
      let start = folders.withLock { folders in
        folders[path, default: Folder()].waiting.append(hear)
        guard !folders[path]!.flushing else { return false }
        folders[path]!.flushing = true
        return true
      }
      if start { toStart.append(path) }
    }
    let here = flushingHere ? toStart.popLast() : nil
    for path in toStart {
      let operations = operations(for: path)
      pool.submit { self.drain(path, operations) }
    }
    if let here { drain(here, operations(for: here)) }
  }

  /// The outcomes of one upload's flushes of several folders.
  private final class Tally: Sendable {
    private let state: Mutex<(left: Int, flushed: Bool)>

    init(_ count: Int) { state = Mutex((count, true)) }

    /// Counts one outcome; returns them all combined once the last is in.
    func count(_ flushed: Bool) -> Bool? {
      state.withLock { state in
        state.left -= 1
        state.flushed = state.flushed && flushed
        return state.left == 0 ? state.flushed : nil
      }
    }
  }

  /// Flushes `path` for everyone waiting, again while new waiters arrived meanwhile.
  private func drain(_ path: String, _ operations: Operations) {
    while true {
      let batch = folders.withLock { folders -> [@Sendable (Bool) -> Void] in
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
      for waiter in batch { waiter(flushed) }
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

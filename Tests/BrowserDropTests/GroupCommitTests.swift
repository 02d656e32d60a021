import BrowserDropSystem
import BrowserDropTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

@testable import BrowserDrop

/// Group commit (`FolderSync`): uploads finishing together share folder flushes, a flush covers
/// only names made before it started, a failed flush fails only the uploads it covers, and on
/// the real server every 201 comes after its data, its name and its folder were flushed, in
/// that order.
@Suite("Group commit of durable uploads")
struct GroupCommitTests {
  /// A gate a pool thread waits at until the test opens it.
  final class Gate: Sendable {
    private let condition = ThreadCondition()
    private let open = Atomic(false)

    func wait() {
      condition.withLock {
        while !open.load(ordering: .acquiring) { condition.wait() }
      }
    }

    func release() {
      condition.withLock {
        open.store(true, ordering: .releasing)
        condition.broadcast()
      }
    }
  }

  /// A value the flush stand-ins of one test share (a closure can't capture a lock itself).
  final class Shared<Value: Sendable>: Sendable {
    let value: Mutex<Value>

    init(_ value: Value) { self.value = Mutex(value) }
  }

  /// One folder flush as the stand-in saw it: how many names existed when it started.
  struct FlushRecord: Sendable {
    var folder: String
    var namesAtStart: Int
    var done = false
  }

  /// Folder flushes that record what they cover; the first waits at `gate`, and the ones whose
  /// number (from 0) is in `failing` fail with EIO.
  final class Recorder: Sendable {
    let names = Atomic(0)
    let flushes = Mutex<[FlushRecord]>([])
    let gate = Gate()
    let failing: Set<Int>
    let failingFolders: Set<String>

    init(failing: Set<Int> = [], failingFolders: Set<String> = []) {
      self.failing = failing
      self.failingFolders = failingFolders
    }

    var operations: FolderSync.Operations {
      FolderSync.Operations(
        syncData: { _, _ in nil },
        syncFolder: { path in
          let index = self.flushes.withLock { flushes in
            flushes.append(
              FlushRecord(folder: path, namesAtStart: self.names.load(ordering: .acquiring)))
            return flushes.count - 1
          }
          if index == 0 { self.gate.wait() }
          self.flushes.withLock { $0[index].done = true }
          return self.failing.contains(index) || self.failingFolders.contains(path)
            ? SystemError(call: "fsync", code: EIO) : nil
        })
    }
  }

  /// Waits, bounded, until `count` uploads wait for a flush of `path` that has not started.
  private func waitUntil(_ sync: FolderSync, has count: Int, waitingFor path: String) async throws {
    let deadline = ContinuousClock.now + .seconds(10)
    while sync.waitingCount(path) < count {
      guard ContinuousClock.now < deadline else {
        Issue.record("only \(sync.waitingCount(path)) of \(count) waiting")
        return
      }
      await Task.yield()
    }
  }

  @Test func uploadsFinishingTogetherShareOneFolderFlush() async throws {
    let recorder = Recorder()
    let pool = BlockingPool(name: "bd-test-sync", threads: 4)
    let sync = FolderSync(pool: pool, operations: recorder.operations)
    let uploads = 40
    let results = try await withThrowingTaskGroup(of: (Int, Bool, Bool).self) { group in
      // The first upload's flush starts and waits at the gate; the others name their files
      // meanwhile and must wait for the next flush, which covers all of them at once.
      let first = recorder.names.add(1, ordering: .acquiringAndReleasing).newValue
      group.addTask { (first, await sync.flush(["/f"]), true) }
      let deadline = ContinuousClock.now + .seconds(10)
      while recorder.flushes.withLock({ $0.isEmpty }) && ContinuousClock.now < deadline {
        await Task.yield()
      }
      for _ in 1..<uploads {
        let name = recorder.names.add(1, ordering: .acquiringAndReleasing).newValue
        group.addTask {
          let flushed = await sync.flush(["/f"])
          // A completed flush that started after this name was made must exist.
          let covered = recorder.flushes.withLock { flushes in
            flushes.contains { $0.done && $0.namesAtStart >= name }
          }
          return (name, flushed, covered)
        }
      }
      try await waitUntil(sync, has: uploads - 1, waitingFor: "/f")
      recorder.gate.release()
      var results: [(Int, Bool, Bool)] = []
      for try await result in group { results.append(result) }
      return results
    }
    #expect(results.count == uploads)
    #expect(results.allSatisfy { $0.1 && $0.2 })
    let flushes = recorder.flushes.withLock { $0 }
    #expect(flushes.count == 2, "40 uploads took \(flushes.count) flushes")
    #expect(flushes.last?.namesAtStart == uploads)
    await pool.shutdown()
  }

  /// The same through `join`, as durable uploads call it: from the I/O thread that named the
  /// file, which runs the flush itself when none is running.
  @Test func uploadsJoiningFromTheirIOThreadsShareOneFolderFlush() async throws {
    let recorder = Recorder()
    let pool = BlockingPool(name: "bd-test-sync", threads: 4)
    let sync = FolderSync(pool: pool, operations: recorder.operations)
    let placement = StagingFolder.Placement(folder: "/f", changed: ["/f"], created: [])
    @Sendable func joinFromPool() async -> Bool {
      await withCheckedContinuation { continuation in
        pool.submit { sync.join(placement, under: "/f") { continuation.resume(returning: $0) } }
      }
    }
    let uploads = 40
    let results = try await withThrowingTaskGroup(of: Bool.self) { group in
      group.addTask { await joinFromPool() }
      let deadline = ContinuousClock.now + .seconds(10)
      while recorder.flushes.withLock({ $0.isEmpty }) && ContinuousClock.now < deadline {
        await Task.yield()
      }
      for _ in 1..<uploads { group.addTask { await joinFromPool() } }
      try await waitUntil(sync, has: uploads - 1, waitingFor: "/f")
      recorder.gate.release()
      var results: [Bool] = []
      for try await result in group { results.append(result) }
      return results
    }
    #expect(results.count == uploads && results.allSatisfy { $0 })
    let flushes = recorder.flushes.withLock { $0.count }
    #expect(flushes == 2, "40 uploads took \(flushes) flushes")
    await pool.shutdown()
  }

  @Test func aFailedFlushFailsOnlyTheUploadsItCovers() async throws {
    // Flush 0 succeeds (one upload), flush 1 fails (the 9 that waited meanwhile), and an upload
    // after that gets flush 2, which succeeds.
    let recorder = Recorder(failing: [1])
    let pool = BlockingPool(name: "bd-test-sync", threads: 4)
    let sync = FolderSync(pool: pool, operations: recorder.operations)
    let (firstResult, covered) = try await withThrowingTaskGroup(of: (Int, Bool).self) { group in
      group.addTask { (0, await sync.flush(["/f"])) }
      let deadline = ContinuousClock.now + .seconds(10)
      while recorder.flushes.withLock({ $0.isEmpty }) && ContinuousClock.now < deadline {
        await Task.yield()
      }
      for index in 1...9 { group.addTask { (index, await sync.flush(["/f"])) } }
      try await waitUntil(sync, has: 9, waitingFor: "/f")
      recorder.gate.release()
      var first = false
      var others: [Bool] = []
      for try await (index, flushed) in group {
        if index == 0 { first = flushed } else { others.append(flushed) }
      }
      return (first, others)
    }
    #expect(firstResult)
    #expect(covered.count == 9 && covered.allSatisfy { !$0 })
    #expect(await sync.flush(["/f"]))
    #expect(recorder.flushes.withLock { $0.count } == 3)
    await pool.shutdown()
  }

  @Test func aFailingFolderFailsOnlyItsOwnUploads() async throws {
    let recorder = Recorder(failingFolders: ["/bad"])
    recorder.gate.release()
    let pool = BlockingPool(name: "bd-test-sync", threads: 4)
    let sync = FolderSync(pool: pool, operations: recorder.operations)
    let results = await withTaskGroup(of: (String, Bool).self) { group in
      for index in 0..<30 {
        let folder = index % 3 == 0 ? "/bad" : "/good-\(index % 2)"
        group.addTask { (folder, await sync.flush([folder])) }
      }
      var results: [(String, Bool)] = []
      for await result in group { results.append(result) }
      return results
    }
    #expect(results.count == 30)
    for (folder, flushed) in results {
      #expect(flushed == (folder != "/bad"), "\(folder)")
    }
    // An upload that changed a good and a bad folder fails.
    #expect(!(await sync.flush(["/good-0", "/bad"])))
    await pool.shutdown()
  }

  @Test func anUploadIntoAFolderAnotherJustMadeAlsoFlushesThatFolderIntoItsParent() async {
    let recorder = Recorder(failingFolders: ["/s"])
    recorder.gate.release()
    let pool = BlockingPool(name: "bd-test-sync", threads: 2)
    let sync = FolderSync(pool: pool, operations: recorder.operations)
    func flushed() -> Set<String> {
      recorder.flushes.withLock { flushes in
        defer { flushes.removeAll() }
        return Set(flushes.map(\.folder))
      }
    }
    // Upload A made /s/a/b; before its flushes complete, upload B stores /s/a/b/two.
    sync.noteMade("/s/a")
    sync.noteMade("/s/a/b")
    let intoMadeFolder = StagingFolder.Placement(folder: "/s/a/b", changed: ["/s/a/b"], created: [])
    // The flush of /s fails: B fails, and the folders stay unflushed.
    #expect(!(await sync.flush(intoMadeFolder, under: "/s")))
    #expect(flushed() == ["/s/a/b", "/s/a", "/s"])
    // A's own flushes, /s now working: afterwards the folders are known durable.
    let recovered = Recorder()
    recovered.gate.release()
    let working = FolderSync(pool: pool, operations: recovered.operations)
    let made = StagingFolder.Placement(
      folder: "/s/a/b", changed: ["/s", "/s/a", "/s/a/b"],
      created: [working.noteMade("/s/a"), working.noteMade("/s/a/b")])
    #expect(await working.flush(made, under: "/s"))
    recovered.flushes.withLock { $0.removeAll() }
    #expect(await working.flush(intoMadeFolder, under: "/s"))
    #expect(recovered.flushes.withLock { $0.map(\.folder) } == ["/s/a/b"])
    await pool.shutdown()
  }

  /// Upload A made `/s/a`; while A's flush of `/s` runs, the operator removes the folder and
  /// upload B makes it again. A's flush began before B's `mkdir`, so it does not cover B's
  /// entry: an upload C into `/s/a` before B's own flushes must still flush `/s`.
  @Test func aFolderMadeAgainWhileItsMakersFlushRunsStaysUnflushed() async {
    let gate = Gate()
    let started = Shared<[String]>([])
    let operations = FolderSync.Operations(
      syncData: { _, _ in nil },
      syncFolder: { path in
        let firstOfRoot = started.value.withLock { started in
          defer { started.append(path) }
          return path == "/s" && !started.contains("/s")
        }
        if firstOfRoot { gate.wait() }
        return nil
      })
    let pool = BlockingPool(name: "bd-test-sync", threads: 4)
    let sync = FolderSync(pool: pool, operations: operations)
    let madeByA = sync.noteMade("/s/a")
    let placementA = StagingFolder.Placement(
      folder: "/s/a", changed: ["/s", "/s/a"], created: [madeByA])
    async let flushedA = sync.flush(placementA, under: "/s")
    let deadline = ContinuousClock.now + .seconds(10)
    while !started.value.withLock({ $0.contains("/s") }) && ContinuousClock.now < deadline {
      await Task.yield()
    }
    #expect(started.value.withLock { $0.contains("/s") }, "A's flush of /s never began")
    // Removed by the operator, made again by B, after A's flush of /s began.
    sync.noteMade("/s/a")
    gate.release()
    #expect(await flushedA)
    started.value.withLock { $0.removeAll() }
    let intoRemade = StagingFolder.Placement(folder: "/s/a", changed: ["/s/a"], created: [])
    #expect(await sync.flush(intoRemade, under: "/s"))
    #expect(
      Set(started.value.withLock { $0 }) == ["/s", "/s/a"],
      "C's 201 would not wait for the flush holding B's entry of /s/a")
    await pool.shutdown()
  }
}

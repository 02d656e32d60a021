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
    working.noteMade("/s/a")
    working.noteMade("/s/a/b")
    let made = StagingFolder.Placement(
      folder: "/s/a/b", changed: ["/s", "/s/a", "/s/a/b"], created: ["/s/a", "/s/a/b"])
    #expect(await working.flush(made, under: "/s"))
    recovered.flushes.withLock { $0.removeAll() }
    #expect(await working.flush(intoMadeFolder, under: "/s"))
    #expect(recovered.flushes.withLock { $0.map(\.folder) } == ["/s/a/b"])
    await pool.shutdown()
  }
}

/// The same rules through the real server: many concurrent durable uploads, their flushes
/// recorded by a stand-in that calls the real ones.
@Suite("Group commit on the real server")
struct GroupCommitServerTests {
  enum Step: Sendable, Equatable {
    /// A data flush began; `named` says whether the final name already existed (it must not).
    case dataStart(label: String, named: Bool)
    case dataDone(label: String)
    /// A folder flush began, with the names the folder held then (what it covers).
    case folderStart(path: String, names: Set<String>)
    case folderDone(path: String)
  }

  final class Trace: Sendable {
    let steps = Mutex<[Step]>([])
    let failingLabels: Set<String>
    let failingFolderSuffixes: [String]
    let sessionFolder: String

    init(
      sessionFolder: String, failingLabels: Set<String> = [], failingFolderSuffixes: [String] = []
    ) {
      self.sessionFolder = sessionFolder
      self.failingLabels = failingLabels
      self.failingFolderSuffixes = failingFolderSuffixes
    }

    var operations: FolderSync.Operations {
      FolderSync.Operations(
        syncData: { fd, label in
          let named = access(self.sessionFolder + "/" + label, F_OK) == 0
          self.steps.withLock { $0.append(.dataStart(label: label, named: named)) }
          let failure = FolderSync.Operations.system.syncData(fd, label)
          self.steps.withLock { $0.append(.dataDone(label: label)) }
          if self.failingLabels.contains(label) { return SystemError(call: "fdatasync", code: EIO) }
          return failure
        },
        syncFolder: { path in
          let names = Set((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [])
          self.steps.withLock { $0.append(.folderStart(path: path, names: names)) }
          let failure = FolderSync.Operations.system.syncFolder(path)
          self.steps.withLock { $0.append(.folderDone(path: path)) }
          if self.failingFolderSuffixes.contains(where: path.hasSuffix) {
            return SystemError(call: "fsync", code: EIO)
          }
          return failure
        })
    }

    /// Whether `steps` show `relativePath`'s data flushed before its name existed, then a
    /// completed flush of its folder that began after the data flush and covered its name, and a
    /// completed flush covering each folder above it.
    static func inOrder(_ relativePath: String, sessionFolder: String, _ steps: [Step]) -> Bool {
      guard
        let dataStart = steps.firstIndex(where: {
          if case .dataStart(relativePath, _) = $0 { true } else { false }
        }),
        case .dataStart(_, let named) = steps[dataStart], !named,
        let dataDone = steps.firstIndex(of: .dataDone(label: relativePath)), dataDone > dataStart
      else { return false }
      func coveredFlush(of folder: String, naming name: String, after earliest: Int) -> Bool {
        steps.indices.contains { index in
          guard index > earliest, case .folderStart(let path, let names) = steps[index],
            path == folder, names.contains(name)
          else { return false }
          return steps[(index + 1)...].contains(.folderDone(path: folder))
        }
      }
      var components = relativePath.split(separator: "/").map(String.init)
      var after = dataDone
      while let name = components.popLast() {
        let folder = ([sessionFolder] + components).joined(separator: "/")
        guard coveredFlush(of: folder, naming: name, after: after) else { return false }
        // A folder above the file may have been made and flushed before this upload began.
        after = -1
      }
      return true
    }
  }

  @Test func concurrentDurableUploadsAnswerOnlyAfterDataNameAndFolderAreFlushed() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let sessionFolder = session.server.sessionFolder.path
    let trace = Trace(sessionFolder: sessionFolder)
    FolderSync.replaceOperationsForTesting(under: session.root.path, with: trace.operations)
    defer { FolderSync.removeOperationsForTesting(under: session.root.path) }
    let uploads = 48
    let results = try await withThrowingTaskGroup(of: (String, Int, Bool).self) { group in
      for index in 0..<uploads {
        let path = index % 4 == 0 ? "top-\(index).bin" : "group-\(index % 3)/file-\(index).bin"
        let body = TestBytes.make(1 + index * 311, seed: UInt64(index) + 1)
        group.addTask {
          let reply = try await session.upload(path, body)
          // What had been flushed when this 201 arrived.
          let ordered = Trace.inOrder(
            path, sessionFolder: sessionFolder, trace.steps.withLock { $0 })
          return (path, reply.status, ordered)
        }
      }
      var results: [(String, Int, Bool)] = []
      for try await result in group { results.append(result) }
      return results
    }
    #expect(results.count == uploads)
    for (path, status, ordered) in results {
      #expect(status == 201, "\(path)")
      #expect(ordered, "\(path): answered before its data, name and folder were flushed in order")
    }
    let staged = session.stagedFiles()
    #expect(staged.count == uploads)
    for index in 0..<uploads {
      let path = index % 4 == 0 ? "top-\(index).bin" : "group-\(index % 3)/file-\(index).bin"
      #expect(staged[path] == TestBytes.make(1 + index * 311, seed: UInt64(index) + 1), "\(path)")
    }
  }

  @Test func aFailedFlushFailsOnlyTheUploadsItCovers() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let sessionFolder = session.server.sessionFolder.path
    let trace = Trace(
      sessionFolder: sessionFolder, failingLabels: ["ok/bad-data.bin"],
      failingFolderSuffixes: ["/broken"])
    FolderSync.replaceOperationsForTesting(under: session.root.path, with: trace.operations)
    defer { FolderSync.removeOperationsForTesting(under: session.root.path) }
    var paths = (0..<12).map { "ok/file-\($0).bin" } + (0..<6).map { "broken/file-\($0).bin" }
    paths.append("ok/bad-data.bin")
    let results = try await withThrowingTaskGroup(of: (String, HTTPReply).self) { group in
      for path in paths {
        group.addTask { (path, try await session.upload(path, TestBytes.make(4096))) }
      }
      var results: [(String, HTTPReply)] = []
      for try await result in group { results.append(result) }
      return results
    }
    for (path, reply) in results {
      let fails = path.hasPrefix("broken/") || path == "ok/bad-data.bin"
      #expect(reply.status == (fails ? 500 : 201), "\(path) got \(reply.status)")
      if fails { #expect(reply.json?["error"] as? String == "write_failed", "\(path)") }
    }
    // The data flush failed before the name was made: that file is not stored at all.
    #expect(session.stagedFiles()["ok/bad-data.bin"] == nil)
    #expect(!(await session.server.receivedFiles.contains { $0.relativePath == "ok/bad-data.bin" }))
  }
}

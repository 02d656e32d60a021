import BrowserDropSystem
import BrowserDropTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

@testable import BrowserDrop

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
    func fails(_ path: String) -> Bool { path.hasPrefix("broken/") || path == "ok/bad-data.bin" }
    for (path, reply) in results {
      #expect(reply.status == (fails(path) ? 500 : 201), "\(path) got \(reply.status)")
      if fails(path) { #expect(reply.json?["error"] as? String == "write_failed", "\(path)") }
    }
    // Only what got its 201 is listed, on the disk, and announced: a failed one is reported
    // once, as failed, and its file is gone.
    let stored = Set(paths.filter { !fails($0) })
    #expect(Set(await session.server.receivedFiles.map(\.relativePath)) == stored)
    #expect(Set(session.stagedFiles().keys) == stored)
    let expected = 2 * paths.count
    let events = try await session.log.wait { events in
      events.filter { $0.isUploadEvent }.count >= expected
    }
    for path in paths {
      let finished = events.filter {
        if case .uploadFinished(let file) = $0 { file.relativePath == path } else { false }
      }
      let failed = events.filter {
        if case .uploadFailed(let upload, .writeFailed(_)) = $0 {
          upload.relativePath == path
        } else {
          false
        }
      }
      #expect(finished.count == (fails(path) ? 0 : 1), "\(path): \(finished.count) finished")
      #expect(failed.count == (fails(path) ? 1 : 0), "\(path): \(failed.count) failed")
    }
  }

  /// A durable upload that replaces an earlier file of its path and then meets a failed folder
  /// flush: its name is removed again, and the earlier file, replaced on the disk, is no longer
  /// listed either.
  @Test func aFailedFolderFlushOfAReplacementListsNeitherFile() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let failing = GroupCommitTests.Shared(false)
    let operations = FolderSync.Operations(
      syncData: FolderSync.Operations.system.syncData,
      syncFolder: { path in
        failing.value.withLock { $0 }
          ? SystemError(call: "fsync", code: EIO) : FolderSync.Operations.system.syncFolder(path)
      })
    FolderSync.replaceOperationsForTesting(under: session.root.path, with: operations)
    defer { FolderSync.removeOperationsForTesting(under: session.root.path) }
    #expect(try await session.upload("late/r.bin", TestBytes.make(100)).status == 201)
    failing.value.withLock { $0 = true }
    let reply = try await session.upload("late/r.bin", TestBytes.make(200, seed: 2))
    #expect(reply.status == 500 && reply.json?["error"] as? String == "write_failed")
    #expect(await session.server.receivedFiles.isEmpty)
    #expect(session.stagedFiles().isEmpty)
  }

  /// A resumable upload whose folder flush fails is not remembered as complete: HEAD does not
  /// know it, so its client sends it again rather than trusting a file that is gone.
  @Test func aResumableUploadWhoseFolderFlushFailsIsNotComplete() async throws {
    let session = try await ResumeTests.start()
    defer { Task { await session.stop() } }
    let operations = FolderSync.Operations(
      syncData: FolderSync.Operations.system.syncData,
      syncFolder: { _ in SystemError(call: "fsync", code: EIO) })
    FolderSync.replaceOperationsForTesting(under: session.root.path, with: operations)
    defer { FolderSync.removeOperationsForTesting(under: session.root.path) }
    let body = TestBytes.make(50_000, seed: 5)
    let client = ResumeClient(port: session.port, path: "r/a.bin", id: ResumeClient.randomID())
    let reply = try await client.exchange(client.postHead(length: body.count), body[...])
    #expect(reply.status == 500 && reply.errorCode == "write_failed")
    #expect(try await client.offset() == nil, "HEAD says the upload is there")
    #expect(await session.server.receivedFiles.isEmpty)
    #expect(session.stagedFiles().isEmpty)
  }
}

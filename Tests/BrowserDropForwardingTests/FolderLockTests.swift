import BrowserDropTestSupport
import Foundation
import Glibc
import Testing

@testable import BrowserDropForwarding

/// One delivery of a folder at a time. Two `Forwarder`s of one folder used to both find no
/// attempt for a file the first had not reached yet and both send it (`b.txt` and `b 2.txt`),
/// and the second could remove the first's temporary file or claim. Now the second fails at
/// once with `folderBusy`, sending nothing; a lock held by another process (an `flock` on the
/// folder's lock file) does the same after `FolderLock.busyWait`, and is gone with its holder.
@Suite("One delivery of a folder at a time")
struct FolderLockTests {
  @Test(
    "A second delivery of a folder in progress fails at once, and each file arrives once",
    arguments: CrashResumeTests.Place.allCases)
  func secondDeliveryFails(place: CrashResumeTests.Place) async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let (destination, folder) = try CrashResumeTests.destination(place, scratch)
    let files = ["a.txt": Data("a".utf8), "b.txt": Data("bee".utf8)]
    let batch = try scratch.folder("batch", files)
    // The first delivery waits in its progress report after a.txt until the second has tried.
    let (reached, reaching) = AsyncStream<Void>.makeStream()
    let (tried, trying) = AsyncStream<Void>.makeStream()
    let once = Counter()
    let first = Task {
      try await Forwarder().forward(folder: batch, to: destination) { progress in
        guard progress.completedFiles == 1, await once.next() == 1 else { return }
        reaching.yield()
        for await _ in tried { return }
      }
    }
    defer { first.cancel() }
    // Generous: SMB work of the whole test process runs on one thread (`DedicatedThread.smb`),
    // where this delivery can queue behind other suites' transfers of hundreds of MiB (two CI
    // runs saw 30 s pass).
    try await within(.seconds(120)) {
      for await _ in reached { return }
    }
    await #expect(throws: ForwardFailure(kind: .folderBusy, place: .source, item: batch.path)) {
      _ = try await Forwarder().forward(folder: batch, to: destination)
    }
    trying.yield()
    trying.finish()
    let report = try await within(.seconds(120)) { try await first.value }
    #expect(report.files.map(\.destination).sorted() == ["a.txt", "b.txt"])
    let found = try contents(of: folder)
    #expect(found == files, "\(found.keys.sorted())")
  }

  /// Another process's lock (here an `flock` through a file of the test's own) keeps a
  /// delivery out, after `FolderLock.busyWait`; released while a delivery tries again (as the
  /// kernel releases it when its process ends, even by `kill -9`, or as a child process the
  /// host started lets go of its copy of the lock file's descriptor at its `exec`: seen as a
  /// spurious `folderBusy` in tests that start processes), the delivery runs.
  @Test("Another process's lock fails the delivery after a wait; released within it, it runs")
  func anotherProcessLock() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let (destination, folder) = try CrashResumeTests.destination(.local, scratch)
    let batch = try scratch.folder("batch", ["a.txt": Data("a".utf8)])
    let holder = open(batch.path + "/" + FolderLock.fileName, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
    try #require(holder >= 0)
    var closed = false
    defer { if !closed { close(holder) } }
    try #require(flock(holder, LOCK_EX | LOCK_NB) == 0)
    await #expect(throws: ForwardFailure(kind: .folderBusy, place: .source, item: batch.path)) {
      _ = try await Forwarder().forward(folder: batch, to: destination)
    }
    #expect(try contents(of: folder).isEmpty, "nothing was sent")
    let delivery = Task { try await Forwarder().forward(folder: batch, to: destination) }
    // A moment into its wait: no event marks the delivery's tries.
    try await Task.sleep(for: .milliseconds(300))
    close(holder)
    closed = true
    let report = try await delivery.value
    #expect(report.files.map(\.destination) == ["a.txt"])
    #expect(try contents(of: folder) == ["a.txt": Data("a".utf8)])
    #expect(!FileManager.default.fileExists(atPath: batch.path), "the folder, lock file and all")
  }
}

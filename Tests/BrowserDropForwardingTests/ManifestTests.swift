import BrowserDropSystem
import BrowserDropTestSupport
import Foundation
import Glibc
import Testing

@testable import BrowserDropForwarding

/// The manifest's records on the disk: a record cut short (a crash, a full disk) never takes the
/// next one with it, a record whose write fails is cut off again, and a reader waiting for a
/// claim child's lock leaves the local lane to everyone else.
@Suite("Manifest records and lock")
struct ManifestTests {
  /// A record for `source`, as `Manifest.append` writes it: one JSON line.
  private static func line(_ source: String) async throws -> [UInt8] {
    let manifest = try await Manifest.load(
      folder: "/nonexistent/browserdrop", destination: "smb://test/share")
    let file = SourceFile(absolutePath: "/nonexistent/" + source, relative: [source], size: 7)
    return try Manifest.line(
      manifest.record(
        .uploading, source: file, attempt: "attempt-\(source)",
        temporary: [".browserdrop-\(source).part"]))
  }

  /// The sources the manifest in `folder` has whole records of.
  private static func sources(in folder: URL) async throws -> [String] {
    try await Manifest.load(folder: folder.path, destination: "smb://test/share").attempts.keys
      .sorted()
  }

  private static func bytes(of url: URL) throws -> [UInt8] { Array(try Data(contentsOf: url)) }

  /// A manifest in `scratch` holding the record for a.txt and then the first 30 bytes of b.txt's
  /// (a line cut short); its folder, its file, and what it holds.
  private static func manifestWithALineCutShort(
    in scratch: Scratch
  ) async throws -> (folder: URL, file: URL, bytes: [UInt8]) {
    let folder = try scratch.folder("batch", [:])
    let file = folder.appendingPathComponent(Manifest.fileName)
    let bytes = try await line("a.txt") + Array(try await line("b.txt").prefix(30))
    try Data(bytes).write(to: file)
    return (folder, file, bytes)
  }

  /// Appends this process's record for `name` to the manifest in `folder` (`Durable.append`).
  private static func append(_ name: String, in folder: URL) async throws {
    var manifest = try await Manifest.load(folder: folder.path, destination: "smb://test/share")
    let source = SourceFile(absolutePath: "/nonexistent/" + name, relative: [name], size: 7)
    try await manifest.append(
      .uploading, source: source, attempt: "attempt-\(name)",
      temporary: [".browserdrop-\(name).part"])
  }

  /// A line cut short by a crash, then a record appended by this process: the record starts on a
  /// line of its own, so the reader skips only the cut line and reads the one after it.
  @Test func aRecordAfterALineCutShortStartsOnALineOfItsOwn() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let (folder, url, start) = try await Self.manifestWithALineCutShort(in: scratch)
    let third = try await Self.line("c.txt")

    try await Self.append("c.txt", in: folder)

    #expect(try Self.bytes(of: url) == start + [UInt8(ascii: "\n")] + third)
    #expect(try await Self.sources(in: folder) == ["a.txt", "c.txt"])
  }

  /// In a process whose file size limit (`RLIMIT_FSIZE`) ends the file part-way through a
  /// record: the record before it, written after a line cut short, starts on its own line; the
  /// one that hits the limit fails with `EFBIG` after a short write and is cut off again, so the
  /// file ends exactly as it was; the next record (no limit) follows without a blank line; and
  /// every whole record is read.
  @Test func aRecordThatFailsPartWayIsCutOffAgain() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let (folder, url, start) = try await Self.manifestWithALineCutShort(in: scratch)
    let (fits, fails) = (try await Self.line("d.txt"), try await Self.line("e.txt"))
    let after = try await Self.line("f.txt")
    // Room for a newline, the whole of `fits` and half of `fails`.
    let limit = start.count + 1 + fits.count + fails.count / 2

    let run = try await ChildProcess.capture(
      ChildProcess.product("BrowserDropFaultHost").path,
      [
        "append", url.path, String(decoding: fits.dropLast(), as: UTF8.self),
        String(decoding: fails.dropLast(), as: UTF8.self),
      ], limits: [.fileSize(limit)], timeout: .seconds(60))

    #expect(run.status == 0, "exit status \(run.status): \(run.errorOutput)")
    #expect(run.output == "ok\nwrite: File too large (errno 27)\n", "\(run.output)")
    let kept = start + [UInt8(ascii: "\n")] + fits
    #expect(try Self.bytes(of: url) == kept, "the failed record's part is gone")

    try await Self.append("f.txt", in: folder)
    #expect(try Self.bytes(of: url) == kept + after)
    #expect(try await Self.sources(in: folder) == ["a.txt", "d.txt", "f.txt"])
  }

  /// A manifest whose exclusive lock is held (as a claim child holds it): the load waits off the
  /// local lane, so a job queued there after it finishes at once, and once the lock is released
  /// the load returns the records.
  @Test func aLoadWaitingForTheLockLeavesTheLaneFree() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let folder = try scratch.folder("batch", [:])
    let url = folder.appendingPathComponent(Manifest.fileName)
    let record = try await Self.line("a.txt")
    try Data(record).write(to: url)
    let holder = open(url.path, O_RDONLY | O_CLOEXEC)
    try #require(holder >= 0)
    var released = false
    defer { if !released { close(holder) } }
    // Uncontended, so it returns at once.
    try #require(flock(holder, LOCK_EX | LOCK_NB) == 0)

    let (locked, found) = AsyncStream<Void>.makeStream()
    let loaded = Counter()
    let load = Task {
      let sources = try await Manifest.load(folder: folder.path, destination: "smb://test/share") {
        _ = found.yield()
      }.attempts.keys.sorted()
      _ = await loaded.next()
      return sources
    }
    defer { load.cancel() }
    try await within(.seconds(10)) {
      for await _ in locked { return }
    }
    // Ordering, not timing: the lane job finishes while the lock is still held (the load has
    // not returned), so the waiting load does not occupy the lane.
    let answer = try await within(.seconds(30)) {
      await DedicatedThread.localIO.run { 42 }
    }
    #expect(answer == 42)
    #expect(await loaded.next() == 1, "the load returned before the lock was released")

    close(holder)
    released = true
    let sources = try await within(.seconds(10)) { try await load.value }
    #expect(sources == ["a.txt"])
  }
}

/// Attempts of a version before attempt ids (no `attempt`) renamed with replacement and never
/// claimed: after an upgrade their `installing` names are not unproven claims (no possible
/// leftovers are reported for them).
@Suite("Manifest records of a version before attempts")
struct LegacyManifestTests {
  @Test func aLegacyAttemptLeavesNoUnprovenClaim() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let folder = try scratch.folder("batch", [:])
    let lines = [
      #"{"destination":"smb://test/share","size":7,"source":"x.txt","state":"installing","target":["x.txt"]}"#,
      #"{"attempt":"new","destination":"smb://test/share","size":7,"source":"x.txt","state":"uploading","target":[],"temporary":[".browserdrop-new.part"]}"#,
    ]
    try Data((lines.joined(separator: "\n") + "\n").utf8)
      .write(to: folder.appendingPathComponent(Manifest.fileName))
    let manifest = try await Manifest.load(folder: folder.path, destination: "smb://test/share")
    #expect(manifest.attempts["x.txt"]?.id == "new")
    #expect(manifest.unprovenClaims["x.txt"] == nil)
  }
}

/// A claim left behind by a superseded attempt stays a name to report, unless the resume that
/// removed it as provably its own recorded `released`: an empty file there later (another
/// kiosk's delivery) is then not reported as this file's possible leftover.
@Suite("Claims left behind by earlier attempts")
struct ClaimLeftBehindTests {
  private static let first = [
    #"{"attempt":"a1","destination":"smb://test/share","size":7,"source":"x.txt","state":"uploading","target":[],"temporary":[".browserdrop-a1.part"]}"#,
    #"{"attempt":"a1","destination":"smb://test/share","fileID":11,"size":7,"source":"x.txt","state":"installing","target":["x.txt"],"temporary":[".browserdrop-a1.part"]}"#,
    #"{"attempt":"a1","destination":"smb://test/share","fileID":11,"size":7,"source":"x.txt","state":"claimed","target":["x.txt"],"temporary":[".browserdrop-a1.part"]}"#,
    #"{"attempt":"a2","destination":"smb://test/share","size":7,"source":"x.txt","state":"uploading","target":[],"temporary":[".browserdrop-a2.part"]}"#,
  ]

  private static func load(_ lines: [String], in scratch: Scratch) async throws -> Manifest {
    let folder = try scratch.folder("batch", [:])
    try Data((lines.joined(separator: "\n") + "\n").utf8)
      .write(to: folder.appendingPathComponent(Manifest.fileName))
    return try await Manifest.load(folder: folder.path, destination: "smb://test/share")
  }

  @Test func aSupersededClaimIsANameToReport() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let manifest = try await Self.load(Self.first, in: scratch)
    #expect(manifest.unprovenClaims["x.txt"]?.map(\.target) == [["x.txt"]])
    #expect(
      manifest.earlierTemporaries["x.txt"] == [[".browserdrop-a1.part"], [".browserdrop-a1.aside"]])
  }

  @Test func aReleasedClaimIsNot() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let released =
      #"{"destination":"smb://test/share","size":7,"source":"x.txt","state":"released","target":["x.txt"]}"#
    let manifest = try await Self.load(Self.first + [released], in: scratch)
    #expect(manifest.unprovenClaims["x.txt"]?.isEmpty ?? true)
    #expect(manifest.attempts["x.txt"]?.id == "a2", "the latest attempt is untouched")
  }
}

/// A wait that did not end in time.
struct TimedOut: Error {}

/// `body`'s result, or `TimedOut` once `limit` has passed (`body` is then cancelled).
func within<T: Sendable>(
  _ limit: Duration, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
  try await withThrowingTaskGroup(of: T?.self) { group in
    group.addTask { try await body() }
    group.addTask {
      try await Task.sleep(for: limit)
      return nil
    }
    defer { group.cancelAll() }
    guard let first = try await group.next(), let value = first else { throw TimedOut() }
    return value
  }
}

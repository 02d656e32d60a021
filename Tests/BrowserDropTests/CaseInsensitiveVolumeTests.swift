import BrowserDropTestSupport
import Foundation
import Glibc
import Testing

@testable import BrowserDrop

/// Whether the staging volume folds case is probed when a session starts (a file is created and
/// looked up in the other case), and a case-insensitive volume makes `A.mp3` after `a.mp3` a
/// conflict. This kernel has no casefolding file system, so a small one is mounted with FUSE
/// (Tests/Fixtures/casefold_fs.py, Debian's python3-fusepy; root only).
@Suite("A case-insensitive staging volume", .serialized)
struct CaseInsensitiveVolumeTests {
  /// The FUSE file system, mounted at `mountPoint` over a folder of its own.
  struct CaseFoldingVolume {
    let base: URL
    let mountPoint: URL
    let process: ChildProcess

    static let script = URL(filePath: #filePath).deletingLastPathComponent()
      .deletingLastPathComponent().appending(path: "Fixtures/casefold_fs.py")

    init() async throws {
      base = FileManager.default.temporaryDirectory.appending(path: "bd-casefold-\(UUID())")
      mountPoint = base.appending(path: "mnt")
      let backing = base.appending(path: "backing")
      for folder in [mountPoint, backing] {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
      }
      process = try ChildProcess(
        "/usr/bin/python3", [Self.script.path, backing.path, mountPoint.path], input: .null,
        output: .inherit, error: .inherit)
      // Mounted when the mount table says so (bounded).
      let deadline = ContinuousClock.now + .seconds(15)
      while !Self.isMounted(mountPoint.path) {
        guard process.termination == nil, ContinuousClock.now < deadline else {
          stop()
          throw CancellationError()
        }
        try await Task.sleep(for: .milliseconds(20))
      }
    }

    static func isMounted(_ path: String) -> Bool {
      FloodTests.readAll("/proc/self/mountinfo").split(separator: "\n").contains {
        $0.split(separator: " ").dropFirst(4).first.map(String.init) == path
      }
    }

    /// Unmounts (the file system's process then ends), waits for it, bounded, and cleans up.
    func stop() {
      if umount2(mountPoint.path, 0) != 0 { umount2(mountPoint.path, Int32(MNT_DETACH)) }
      for _ in 0..<500 where process.termination == nil { usleep(10_000) }
      process.signal(SIGKILL)
      try? FileManager.default.removeItem(at: base)
    }
  }

  static func available() -> Bool {
    guard geteuid() == 0 else {
      Issue.record("CaseInsensitiveVolumeTests needs root to mount FUSE (scripts/test.sh does)")
      return false
    }
    guard FileManager.default.fileExists(atPath: "/usr/lib/python3/dist-packages/fusepy.py")
    else {
      Issue.record("CaseInsensitiveVolumeTests needs python3-fusepy (scripts/setup.sh --test)")
      return false
    }
    return true
  }

  @Test func theProbeTellsACaseFoldingVolumeFromAnOrdinaryOne() async throws {
    guard Self.available() else { return }
    let volume = try await CaseFoldingVolume()
    defer { volume.stop() }
    let folding = StagingFolder(root: volume.mountPoint.appending(path: "staging"))
    try folding.create()
    #expect(folding.probeCaseInsensitivity())
    let ordinary = StagingFolder(root: volume.base.appending(path: "ordinary"))
    try ordinary.create()
    #expect(!ordinary.probeCaseInsensitivity())
    // The probe leaves nothing behind.
    for staging in [folding, ordinary] {
      #expect(try FileManager.default.contentsOfDirectory(atPath: staging.incomingPath).isEmpty)
    }
  }

  @Test func aSessionThereRefusesTheSameNameInAnotherCase() async throws {
    guard Self.available() else { return }
    let volume = try await CaseFoldingVolume()
    defer { volume.stop() }
    let session = try await TestSession.start {
      $0.stagingRoot = volume.mountPoint.appending(path: "staging")
    }
    #expect(try await session.upload("Music/a.mp3", [1]).status == 201)
    for path in ["Music/A.mp3", "MUSIC/b.mp3", "music/a.mp3"] {
      let reply = try await session.upload(path, [2])
      #expect(reply.status == 409, "\(path)")
      #expect(reply.errorCode == "path_conflict", "\(path)")
    }
    // Exactly the same path is a retry, and replaces the file.
    #expect(try await session.upload("Music/a.mp3", [3]).status == 201)
    #expect(try await session.upload("Music/c.mp3", [4]).status == 201)
    #expect(session.stagedFiles() == ["Music/a.mp3": [3], "Music/c.mp3": [4]])
    await session.stop()
  }

  /// On an ordinary (case-sensitive) volume the same names are three different files.
  @Test func anOrdinaryVolumeKeepsNamesThatDifferOnlyInCase() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    for (path, byte) in [("Music/a.mp3", UInt8(1)), ("Music/A.mp3", 2), ("MUSIC/a.mp3", 3)] {
      #expect(try await session.upload(path, [byte]).status == 201, "\(path)")
    }
    #expect(
      session.stagedFiles() == ["Music/a.mp3": [1], "Music/A.mp3": [2], "MUSIC/a.mp3": [3]])
  }
}

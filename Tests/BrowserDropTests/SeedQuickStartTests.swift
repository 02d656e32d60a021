import BrowserDropTestSupport
import Foundation
import Glibc
import Testing

/// Examples/SeedQuickStart is the seed's Quick start as written there; that it builds at all (with
/// no warning, in Swift 6 mode) is half the proof. This runs it, in a network namespace of its
/// own holding nothing but a loopback interface that is down, so its listener on every interface
/// at port 80 is reachable from nowhere.
@Suite("The seed's Quick start, unchanged")
struct SeedQuickStartTests {
  @Test func itListensOnPort80OffersLoopbackAndFinishesWithNothing() async throws {
    guard geteuid() == 0 else {
      Issue.record("SeedQuickStartTests needs root for a network namespace (scripts/test.sh does)")
      return
    }
    let temporary = FileManager.default.temporaryDirectory.appending(path: "bd-seed-\(UUID())")
    defer { try? FileManager.default.removeItem(at: temporary) }
    // The default staging root of a program whose TMPDIR is `temporary`, with what a crashed
    // session left in it and something that is not a session's.
    let root = temporary.appending(path: "browserdrop")
    #expect(mkdir(temporary.path, 0o700) == 0 && mkdir(root.path, 0o700) == 0)
    let manager = FileManager.default
    for folder in ["session-crashed/Book", ".session-crashed.incoming", "outbox"] {
      try manager.createDirectory(
        at: root.appending(path: folder), withIntermediateDirectories: true)
    }
    try Data("half".utf8).write(
      to: root.appending(path: ".session-crashed.incoming/.upload-1.partial"))
    try Data("ch1".utf8).write(to: root.appending(path: "session-crashed/Book/01.mp3"))
    try Data("keep".utf8).write(to: root.appending(path: "outbox/keep.txt"))
    let inbox = temporary.appending(path: "Inbox")

    let run = try await ChildProcess.capture(
      "/usr/bin/unshare", ["--net", "--", ChildProcess.product("SeedQuickStart").path, inbox.path],
      environment: ["TMPDIR": temporary.path, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"])
    #expect(run.status == 0, "\(run.errorOutput)")
    #expect(run.errorOutput.isEmpty)
    let lines = run.output.split(separator: "\n").map(String.init)
    // Port 80, left out of the URL; nothing but loopback in the namespace, so loopback it is.
    #expect(lines.contains("url: http://127.0.0.1/"), "\(lines)")
    #expect(lines.contains("addresses: [\"other lo http://127.0.0.1/\"]"), "\(lines)")
    #expect(lines.contains("received: 0"), "\(lines)")
    // `removeLeftovers()` with no argument cleared the default root of the crashed session and
    // kept the rest; `finish()` returned nil (nothing arrived) and removed the session's folder,
    // so nothing was moved into the inbox.
    #expect(try manager.contentsOfDirectory(atPath: root.path) == ["outbox"])
    #expect(
      manager.contents(atPath: root.appending(path: "outbox/keep.txt").path) == Data("keep".utf8))
    #expect(!manager.fileExists(atPath: inbox.path))
  }
}

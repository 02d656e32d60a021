import BrowserDropTestSupport
import Foundation
import Testing

/// The residual claim window as an operator sees it: a kiosk killed between an SMB claim's
/// create and its record leaves an empty file at the name; the restarted kiosk delivers the file
/// under the next number, leaves the empty one, and names it (the host, share and path) in its
/// plain output or its `--json` line, and counts it in `/metrics`.
@Suite("Possible leftovers of a claim, reported by the kiosk", .serialized)
struct LeftoverReportTests {
  @Test(
    "An empty file an unrecorded claim may have made is reported, never removed",
    arguments: [true, false])
  func unrecordedClaimIsReported(json: Bool) async throws {
    let (smbPort, smbBase) = try LoopbackSMB.shared()
    let folder = try TemporaryFolder()
    let intake = "leftover-\(UUID().uuidString.prefix(8))"
    let root = "smb://127.0.0.1:\(smbPort)/guest/\(intake)"
    // The outbox as a kill -9 right after the server's create (and before the `claimed`
    // record) leaves it: batch 1 with its file and a manifest saying `installing` x.txt.
    let outbox = folder.path("staging/outbox")
    let batch = outbox.appending(path: "1")
    for made in [outbox.appending(path: "journal"), batch] {
      try FileManager.default.createDirectory(at: made, withIntermediateDirectories: true)
    }
    try Data("ex".utf8).write(to: batch.appending(path: "x.txt"))
    try Data(#"{"number":1,"folderName":"batch 1","source":"session-crashed"}"#.utf8)
      .write(to: outbox.appending(path: "journal/1.json"))
    try Data("2\n".utf8).write(to: outbox.appending(path: "next"))
    let record =
      #"{"attempt":"0123456789abcdef","destination":"\#(root)/batch%201","fileID":1,"#
      + #""size":2,"source":"x.txt","state":"installing","target":["x.txt"],"#
      + #""temporary":[".browserdrop-0123456789abcdef.part"]}"#
    try Data((record + "\n").utf8).write(to: batch.appending(path: ".browserdrop-forwarded"))
    // The claim the killed kiosk's create made: empty, owned as the guest's files are.
    let share = smbBase.appending(path: "shares/guest/\(intake)/batch 1")
    try FileManager.default.createDirectory(at: share, withIntermediateDirectories: true)
    try Data().write(to: share.appending(path: "x.txt"))
    for path in [share.deletingLastPathComponent(), share] {
      try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: path.path)
    }

    let metricsPort = try FreePort.closed()
    let command = try CommandProcess(
      ["--kiosk"] + (json ? ["--json"] : []) + [
        "--port", "0", "--bind", "127.0.0.1", "--quiet-period", "60", "--staging",
        folder.path("staging").path, "--to", root, "--batch-folder", "batch {n}", "--metrics",
        "127.0.0.1:\(metricsPort)",
      ])
    defer { Task { await command.stop() } }
    if json {
      let forwarded = try await command.waitForEvent("forwarded", timeout: 60)
      #expect(forwarded.string("destination") == "\(root)/batch%201")
      let leftovers = forwarded["possibleLeftovers"] as? [[String: Any]] ?? []
      #expect(leftovers.count == 1, "\(forwarded)")
      #expect(leftovers.first?["path"] as? String == "x.txt")
      #expect(leftovers.first?["source"] as? String == "x.txt")
      #expect(leftovers.first?["reason"] as? String == "claimNotRecorded")
    } else {
      let line = try await command.waitForLine(containing: "Claim left in place", timeout: 60)
      #expect(
        line
          == "  Claim left in place at \(root)/batch%201: x.txt (empty, or one line “browserdrop "
          + "claim …”). A claim for x.txt that was "
          + "cut off before it was recorded may have made it, or it is a file delivered there "
          + "before (by this kiosk or another writer); x.txt itself arrived under another name. "
          + "Nothing proves this kiosk made it, so it was not removed: check it before you "
          + "remove it.", "\(line)")
    }
    #expect(TemporaryFolder.files(in: share) == ["x 2.txt", "x.txt"])
    #expect(try Data(contentsOf: share.appending(path: "x.txt")).isEmpty)
    #expect(try Data(contentsOf: share.appending(path: "x 2.txt")) == Data("ex".utf8))

    // The metrics server waits 2 s for a request's head; a test client starved of the shared
    // pool in a full parallel run can take longer between connecting and sending, and then
    // reads nothing. Up to three scrapes.
    var metrics = ""
    for _ in 0..<3 where metrics.isEmpty {
      let client = try await RawClient.connect(port: metricsPort)
      try await client.send(
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
      metrics = String(decoding: try await client.readToEnd(), as: UTF8.self)
    }
    #expect(metrics.contains("\nbrowserdrop_forward_possible_leftovers_total 1\n"), "\(metrics)")
    try? FileManager.default.removeItem(at: share.deletingLastPathComponent())
  }
}

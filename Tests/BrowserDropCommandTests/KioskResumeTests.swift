import BrowserDropTestSupport
import Foundation
import Glibc
import Testing

/// A kiosk keeps what a cut-off upload sent in its staging root: `kill -9` during the upload,
/// a restart on the same staging, and the sender resumes where the disk says and the batch is
/// forwarded once.
@Suite("Kiosk: resuming across a crash")
struct KioskResumeTests {
  static let id = "0123456789abcdef0123456789abcdef"

  static func head(port: Int, method: String, extra: String, length: Int) -> String {
    "\(method) /upload?path=Films/big.bin&upload=\(id) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n"
      + "Origin: http://127.0.0.1:\(port)\r\n\(extra)Content-Length: \(length)\r\n\r\n"
  }

  @Test("kill -9 during an upload, restart on the same staging: the upload resumes, forwarded once")
  func killDuringUploadThenResume() async throws {
    let folder = try TemporaryFolder()
    let size = 24 << 20
    let source = try folder.makeFile("src/big.bin", size: size, seed: 9)
    let body = [UInt8](try Data(contentsOf: source))
    let command = try KioskTests.start(folder, quietPeriod: "0.5")
    defer { Task { await command.stop() } }
    let port = try await command.listeningPort()

    // Ten MiB of the body arrive, the connection stays open, and the kiosk is killed.
    let sent = 10 << 20
    let client = try await RawClient.connect(port: port)
    try await client.send(Self.head(port: port, method: "POST", extra: "", length: size))
    try await client.send(body[..<sent])
    let partial = folder.path("staging/.browserdrop-resumable/\(Self.id).partial").path
    try await CrashTrialTests.waitUntil("the partial to hold what was sent", timeout: 20) {
      ((try? FileManager.default.attributesOfItem(atPath: partial)[.size]) as? Int ?? 0) >= sent
    }
    try await CrashTrialTests.sigkill(command)
    client.socket.close()
    #expect(!command.events.contains { $0.event == "forwarded" })

    let restarted = try KioskTests.start(folder, quietPeriod: "0.5")
    defer { Task { await restarted.stop() } }
    let newPort = try await restarted.listeningPort()
    let probe = try await RawClient.connect(port: newPort)
    try await probe.send(
      "HEAD /upload?path=Films/big.bin&upload=\(Self.id) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    let standing = try await probe.readReply()
    #expect(standing.status == 204)
    // Same boot: every byte the kernel had is durable after the restart's flush.
    #expect(standing.headers["upload-offset"] == String(sent))
    #expect(standing.headers["upload-length"] == String(size))

    let patch = try await RawClient.connect(port: newPort)
    try await patch.send(
      Self.head(
        port: newPort, method: "PATCH", extra: "Upload-Offset: \(sent)\r\n", length: size - sent))
    try await patch.send(body[sent...])
    let reply = try await patch.readReply()
    #expect(reply.status == 201, "\(reply.status)")
    let forwarded = try await restarted.waitForEvent("forwarded")
    #expect(forwarded.int("files") == 1)
    let resumed = try #require(restarted.events.first { $0.event == "uploadResumed" })
    #expect(resumed.int("offset") == sent && resumed.int("size") == size)
    restarted.send(SIGTERM)
    #expect(try await restarted.waitForExit() == 0)

    let delivered = TemporaryFolder.files(in: folder.path("dest"))
    #expect(delivered.count == 1 && delivered.first?.hasSuffix("/Films/big.bin") == true)
    if let name = delivered.first {
      #expect(try Data(contentsOf: folder.path("dest/" + name)) == Data(body), "not byte-identical")
    }
    #expect(restarted.events.filter { $0.event == "forwarded" }.count == 1)
    // Nothing of the upload is left in the staging root.
    #expect(TemporaryFolder.files(in: folder.path("staging/.browserdrop-resumable")).isEmpty)
  }
}

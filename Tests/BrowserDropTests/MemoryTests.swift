import BrowserDropTestSupport
import Foundation
import Glibc
import Testing

@testable import BrowserDrop

/// A 1 GiB upload must not raise the server process's peak RSS by more than 32 MiB. Measured on
/// a host program of its own (BrowserDropTestHost, default configuration: fsync and content
/// sniffing on), so that nothing else this test process does counts.
@Suite("Memory: a 1 GiB upload")
struct MemoryTests {
  /// The host, its standard output read by `ChildProcess`'s threads.
  final class Host: Sendable {
    let process: ChildProcess

    init(staging: URL) throws {
      process = try ChildProcess(
        ChildProcess.product("BrowserDropTestHost").path, ["--staging", staging.path],
        input: .pipe, output: .pipe, error: .null)
    }

    /// The port from the first line (`listening`).
    func port() async throws -> Int {
      let deadline = ContinuousClock.now + .seconds(30)
      while ContinuousClock.now < deadline {
        let text = String(decoding: process.output, as: UTF8.self)
        for line in text.split(separator: "\n") {
          if let object = try? JSONSerialization.jsonObject(with: Data(line.utf8))
            as? [String: Any],
            object["event"] as? String == "listening", let port = object["port"] as? Int
          {
            return port
          }
        }
        if process.finished != nil { break }
        try await Task.sleep(for: .milliseconds(20))
      }
      throw RawClient.ClientError.closedWithoutReply("the host ended without listening")
    }

    /// Peak resident set size so far, in KiB (`VmHWM`).
    var peakKiB: Int {
      let status = FloodTests.readAll("/proc/\(process.pid)/status")
      let line = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }
      return Int(line?.split(separator: " ").dropFirst().first ?? "") ?? -1
    }

    /// Ends the session (end of input) and waits, bounded, for the process to exit.
    func stop() async {
      process.closeInput()
      if await process.wait(timeout: .seconds(20)) == nil { process.signal(SIGKILL) }
    }
  }

  @Test(.timeLimit(.minutes(3)))
  func aGibibyteUploadRaisesPeakRSSByLessThan32MiB() async throws {
    let staging = FileManager.default.temporaryDirectory.appending(path: "bd-memory-\(UUID())")
    defer { try? FileManager.default.removeItem(at: staging) }
    let host = try Host(staging: staging)
    let port = try await host.port()
    // A small upload first, so the baseline includes what any first upload maps (the
    // content-type database among it).
    let warmup = try await RawClient.connect(port: port)
    try await warmup.send(
      Requests.uploadHead(port: port, encodedPath: "warm.bin", length: 3) + "abc")
    #expect(try await warmup.readReply().status == 201)
    let before = host.peakKiB

    let size = 1 << 30
    let chunk = TestBytes.make(1 << 20, seed: 5)
    let client = try await RawClient.connect(port: port)
    try await client.send(Requests.uploadHead(port: port, encodedPath: "big.bin", length: size))
    for _ in 0..<(size / chunk.count) { try await client.send(chunk) }
    let reply = try await client.readReply()
    let after = host.peakKiB
    await host.stop()

    #expect(reply.status == 201)
    #expect(before > 0 && after >= before)
    print("1 GiB upload: host VmHWM \(before) KiB before, \(after) KiB after (+\(after - before))")
    #expect(after - before < 32 * 1024, "peak RSS rose by \(after - before) KiB")
  }
}

import Foundation
import Glibc
import Testing

@testable import BrowserDrop

/// A 1 GiB upload must not raise the server process's peak RSS by more than 32 MiB. Measured on
/// a host program of its own (BrowserDropTestHost, default configuration: fsync and content
/// sniffing on), so that nothing else this test process does counts.
@Suite("Memory: a 1 GiB upload")
struct MemoryTests {
  /// The host, with its standard output read line by line on a thread of its own.
  final class Host: @unchecked Sendable {
    let process = Process()
    private let input = Pipe()
    private let lines: AsyncStream<String>

    init(staging: URL) throws {
      process.executableURL = ChildRun.product("BrowserDropTestHost")
      process.arguments = ["--staging", staging.path]
      let output = Pipe()
      process.standardOutput = output
      process.standardInput = input
      process.standardError = FileHandle.nullDevice
      let (stream, continuation) = AsyncStream<String>.makeStream()
      lines = stream
      let reader = output.fileHandleForReading
      Thread.detachNewThread {
        var pending = Data()
        while true {
          let chunk = reader.availableData
          if chunk.isEmpty { break }
          pending.append(chunk)
          while let newline = pending.firstIndex(of: 0x0A) {
            continuation.yield(String(decoding: pending[..<newline], as: UTF8.self))
            pending.removeSubrange(...newline)
          }
        }
        continuation.finish()
      }
      try process.run()
    }

    /// The port from the first line (`listening`).
    func port() async throws -> Int {
      for await line in lines {
        if let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
          object["event"] as? String == "listening", let port = object["port"] as? Int
        {
          return port
        }
      }
      throw RawClient.ClientError.closedWithoutReply("the host ended without listening")
    }

    /// Peak resident set size so far, in KiB (`VmHWM`).
    var peakKiB: Int {
      let status = FloodTests.readAll("/proc/\(process.processIdentifier)/status")
      let line = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }
      return Int(line?.split(separator: " ").dropFirst().first ?? "") ?? -1
    }

    /// Ends the session (end of input) and waits, bounded, for the process to exit.
    func stop() async {
      try? input.fileHandleForWriting.close()
      let deadline = ContinuousClock.now + .seconds(20)
      while process.isRunning, ContinuousClock.now < deadline {
        try? await Task.sleep(for: .milliseconds(20))
      }
      if process.isRunning { kill(process.processIdentifier, SIGKILL) }
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

import BrowserDropTestSupport
import Foundation
import Testing

/// Kiosk mode: batches after the quiet period, and `kill -9` at the worst moments followed by a
/// restart that forwards the outbox with nothing lost and nothing duplicated.
@Suite("Kiosk mode")
struct KioskTests {
  /// Starts the kiosk on a free port, staging in `folder/staging`, forwarding to `folder/dest`
  /// in batch folders named `batch {n}`.
  static func start(
    _ folder: TemporaryFolder, quietPeriod: String, _ extra: [String] = []
  ) throws -> CommandProcess {
    try CommandProcess(
      [
        "--kiosk", "--json", "--port", "0", "--bind", "127.0.0.1", "--quiet-period", quietPeriod,
        "--staging", folder.path("staging").path, "--to", folder.path("dest").path,
        "--batch-folder", "batch {n}",
      ] + extra)
  }

  /// The outbox's journal entries (batches not yet delivered).
  static func journal(_ folder: TemporaryFolder) -> [String] {
    let path = folder.path("staging/outbox/journal").path
    return ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [])
      .filter { !$0.hasPrefix(".") }
  }

  @Test("Batches close after the quiet period, are forwarded, and the port stays the same")
  func batches() async throws {
    let folder = try TemporaryFolder()
    let command = try Self.start(folder, quietPeriod: "0.5")
    defer { Task { await command.stop() } }
    let port = try await command.listeningPort()
    let a = try folder.makeFile("a.bin", size: 50_000, seed: 1)
    let b = try folder.makeFile("b.bin", size: 60_000, seed: 2)
    #expect(try await Uploader.upload(a, as: "a.bin", port: port) == 201)
    let first = try await command.waitForEvent("forwarded")
    #expect(first.int("files") == 1)
    // The next session listens on the same port at once. Count the events before uploading: on
    // a loaded machine the second batch can be forwarded before curl's exit is noticed.
    let count = command.events.count
    #expect(try await Uploader.upload(b, as: "in/b.bin", port: port) == 201)
    try await command.waitForEvent("forwarded", after: count)
    command.send(SIGTERM)
    #expect(try await command.waitForExit() == 0)

    let names = command.events.compactMap(\.event).filter { $0 != "forwardProgress" }
    #expect(
      names == [
        "listening", "uploadStarted", "uploadFinished", "batchClosed", "forwardStarted",
        "forwarded", "uploadStarted", "uploadFinished", "batchClosed", "forwardStarted",
        "forwarded", "stopped",
      ])
    let dest = folder.path("dest")
    #expect(TemporaryFolder.files(in: dest) == ["batch 1/a.bin", "batch 2/in/b.bin"])
    #expect(try Data(contentsOf: dest.appending(path: "batch 2/in/b.bin")) == Data(contentsOf: b))
    #expect(Self.journal(folder).isEmpty)
  }

  @Test("Without --batch-folder each batch lands in a folder named \"{date} {time}\"")
  func defaultBatchFolder() async throws {
    let folder = try TemporaryFolder()
    let command = try CommandProcess([
      "--kiosk", "--json", "--port", "0", "--bind", "127.0.0.1", "--quiet-period", "0.3",
      "--staging", folder.path("staging").path, "--to", folder.path("dest").path,
    ])
    defer { Task { await command.stop() } }
    let port = try await command.listeningPort()
    let file = try folder.makeFile("a.txt", size: 10)
    #expect(try await Uploader.upload(file, as: "a.txt", port: port) == 201)
    let closed = try await command.waitForEvent("batchClosed")
    try await command.waitForEvent("forwarded")
    command.send(SIGTERM)
    #expect(try await command.waitForExit() == 0)
    let name = try #require(closed.string("batch"))
    // Nothing was waiting as it closed: the one upload had been answered.
    #expect(closed.int("handedOver") == 0, "\(closed)")
    #expect(name.wholeMatch(of: /\d{4}-\d{2}-\d{2} \d{2}\.\d{2}\.\d{2}/) != nil, "\(name)")
    #expect(TemporaryFolder.files(in: folder.path("dest")) == [name + "/a.txt"])
  }

  @Test("A batch stays open while an upload is in flight")
  func inFlightKeepsTheBatchOpen() async throws {
    let folder = try TemporaryFolder()
    let quietPeriod = 0.3
    let command = try Self.start(folder, quietPeriod: "\(quietPeriod)")
    defer { Task { await command.stop() } }
    let port = try await command.listeningPort()
    let small = try folder.makeFile("small.bin", size: 1_000)
    let slow = try folder.makeFile("slow.bin", size: 300_000)
    let body = try Data(contentsOf: slow)
    // The slow upload's body is fed by the test: in flight until the test sends the rest,
    // whatever the load.
    let upload = try Uploader.startFed(as: "slow.bin", size: body.count, port: port)
    defer { upload.cut() }
    #expect(upload.write(body.prefix(100_000)))
    try await command.waitForEvent("uploadStarted") { $0.string("path") == "slow.bin" }
    #expect(try await Uploader.upload(small, as: "small.bin", port: port) == 201)
    try await command.waitForEvent("uploadFinished") { $0.string("path") == "small.bin" }
    // Quiet (but for the upload in flight) for many times the quiet period: the batch stays
    // open.
    try await Task.sleep(for: .seconds(quietPeriod * 10))
    let names = command.events.compactMap(\.event)
    #expect(!names.contains("batchClosed"), "\(names)")
    #expect(upload.write(body.dropFirst(100_000)))
    upload.closeInput()
    #expect(try await Uploader.status(of: upload) == 201)
    let closed = try await command.waitForEvent("batchClosed")
    #expect(closed.int("files") == 2, "\(closed)")
    try await command.waitForEvent("forwarded")
    command.send(SIGTERM)
    #expect(try await command.waitForExit() == 0)
    #expect(
      TemporaryFolder.files(in: folder.path("dest")) == ["batch 1/slow.bin", "batch 1/small.bin"])
    #expect(try Data(contentsOf: folder.path("dest/batch 1/slow.bin")) == body)
  }

  @Test("kill -9 during uploads, then a restart: complete files are forwarded once")
  func killDuringUploads() async throws {
    let folder = try TemporaryFolder()
    let command = try Self.start(folder, quietPeriod: "60")
    defer { Task { await command.stop() } }
    let port = try await command.listeningPort()
    let done = try folder.makeFile("done.bin", size: 200_000, seed: 3)
    let partial = try folder.makeFile("partial.bin", size: 2_000_000, seed: 4)
    #expect(try await Uploader.upload(done, as: "folder/done.bin", port: port) == 201)
    let upload = try Uploader.start(partial, as: "partial.bin", port: port, rate: "100K")
    try await command.waitForEvent("uploadStarted") { $0.string("path") == "partial.bin" }
    command.send(SIGKILL)
    _ = try await command.waitForExit()
    #expect(command.terminationSignal == SIGKILL)
    _ = try await Uploader.status(of: upload)

    let restarted = try Self.start(folder, quietPeriod: "60")
    defer { Task { await restarted.stop() } }
    let forwarded = try await restarted.waitForEvent("forwarded")
    #expect(forwarded.int("files") == 1)
    restarted.send(SIGTERM)
    #expect(try await restarted.waitForExit() == 0)
    let dest = folder.path("dest")
    #expect(TemporaryFolder.files(in: dest) == ["batch 1/folder/done.bin"])
    #expect(
      try Data(contentsOf: dest.appending(path: "batch 1/folder/done.bin"))
        == Data(contentsOf: done))
    #expect(Self.journal(folder).isEmpty)
  }

  @Test("kill -9 while forwarding, then a restart: every file arrives exactly once")
  func killDuringForwarding() async throws {
    // The kill follows a progress report from within the delivery; on a loaded machine the
    // report can reach this test after the delivery ended (seen once in a full parallel run),
    // so a kill that lands too late is tried again, with a new kiosk and folder, twice.
    var folder = try TemporaryFolder()
    var sources: [String: URL] = [:]
    var interrupted = false
    for _ in 1...3 where !interrupted {
      folder = try TemporaryFolder()
      sources = [:]
      // The eight uploads go one after another: the quiet period must outlast the gap between
      // two of them on a loaded machine, or the batch closes early and the next upload meets the
      // session change (3 s was too short once in a full parallel run: batch 1 held only part1).
      let command = try Self.start(folder, quietPeriod: "10")
      defer { Task { await command.stop() } }
      let port = try await command.listeningPort()
      for index in 1...8 {
        let name = "part\(index).bin"
        sources[name] = try folder.makeFile(name, size: 64 << 20, seed: UInt8(index))
      }
      for (name, file) in sources.sorted(by: { $0.key < $1.key }) {
        #expect(try await Uploader.upload(file, as: name, port: port) == 201)
      }
      try await command.waitForEvent("forwardProgress") { event in
        let bytes = event.int("bytes") ?? 0
        return bytes > 0 && bytes < (event.int("totalBytes") ?? 0)
      }
      command.send(SIGKILL)
      _ = try await command.waitForExit()
      interrupted = !Self.journal(folder).isEmpty
    }
    #expect(interrupted, "the kill was meant to land mid-delivery, in one of three tries")

    let restarted = try Self.start(folder, quietPeriod: "0.3")
    defer { Task { await restarted.stop() } }
    if interrupted {
      let forwarded = try await restarted.waitForEvent("forwarded", timeout: 120)
      #expect(forwarded.int("files") == 8)
      #expect((forwarded["renamed"] as? [Any])?.isEmpty == true)
    } else {
      _ = try await restarted.listeningPort()
    }
    restarted.send(SIGTERM)
    #expect(try await restarted.waitForExit() == 0)
    let dest = folder.path("dest")
    #expect(TemporaryFolder.files(in: dest) == sources.keys.sorted().map { "batch 1/" + $0 })
    for (name, file) in sources {
      #expect(
        try Data(contentsOf: dest.appending(path: "batch 1/" + name)) == Data(contentsOf: file))
    }
    #expect(Self.journal(folder).isEmpty)
    let outbox = try FileManager.default.contentsOfDirectory(
      atPath: folder.path("staging/outbox").path)
    #expect(Set(outbox).subtracting(["journal", "next"]).isEmpty, "\(outbox)")
  }

  @Test("A destination that is down keeps the batch in the outbox and retries, printing why")
  func destinationDown() async throws {
    let folder = try TemporaryFolder()
    let port = try FreePort.closed()
    let command = try CommandProcess([
      "--kiosk", "--json", "--port", "0", "--bind", "127.0.0.1", "--quiet-period", "0.3",
      "--staging", folder.path("staging").path, "--to", "smb://127.0.0.1:\(port)/share",
    ])
    defer { Task { await command.stop() } }
    let serverPort = try await command.listeningPort()
    let file = try folder.makeFile("f.bin", size: 1000)
    #expect(try await Uploader.upload(file, as: "f.bin", port: serverPort) == 201)
    let failed = try await command.waitForEvent("forwardFailed")
    #expect(failed.string("message")?.contains("127.0.0.1") == true)
    try await command.waitForEvent("retrying")
    // Still taking drops while the destination is down.
    #expect(try await Uploader.upload(file, as: "g.bin", port: serverPort) == 201)
    // Each failed try prints its reason again, and the pause is drawn at random up to a cap
    // that doubles: at most 2 s, 4 s, 8 s… (full jitter, so a fleet doesn't retry in lockstep).
    let retries = try await command.waitForEvents("retrying", count: 3)
    for (retry, cap) in zip(retries.prefix(3), [2, 4, 8]) {
      #expect((1...cap).contains(retry.int("seconds") ?? 0), "\(retries)")
    }
    let failures = command.events.filter { $0.event == "forwardFailed" }
    #expect(failures.count >= 3)
    #expect(failures.allSatisfy { $0.string("message")?.contains("127.0.0.1") == true })
    command.send(SIGTERM)
    #expect(try await command.waitForExit() == 0)
    let stopped = try #require(command.events.last)
    #expect(stopped.event == "stopped")
    #expect(stopped.string("staging")?.hasSuffix("outbox") == true)
    #expect(Self.journal(folder).count == 2)
  }
}

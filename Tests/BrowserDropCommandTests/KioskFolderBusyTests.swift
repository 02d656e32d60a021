import BrowserDropTestSupport
import Foundation
import Glibc
import Testing

/// A batch in the outbox that another delivery holds (its folder lock, as a second kiosk process
/// started on the same staging root by mistake, or a forward still finishing, would hold it) is
/// left alone: the kiosk says so, retries with its backoff, and forwards the batch once the lock
/// is gone, exactly once.
@Suite("A batch another delivery holds")
struct KioskFolderBusyTests {
  @Test("folderBusy is reported and retried; the batch is forwarded once the lock is released")
  func busyBatchWaitsForTheOtherDelivery() async throws {
    let folder = try TemporaryFolder()
    let closedPort = try FreePort.closed()
    let common = [
      "--kiosk", "--json", "--port", "0", "--bind", "127.0.0.1", "--quiet-period", "0.3",
      "--staging", folder.path("staging").path, "--batch-folder", "intake",
    ]
    // A destination that is down keeps the batch in the outbox.
    let first = try CommandProcess(common + ["--to", "smb://127.0.0.1:\(closedPort)/share"])
    defer { Task { await first.stop() } }
    let file = try folder.makeFile("src/f.bin", size: 1000, seed: 7)
    #expect(try await Uploader.upload(file, as: "f.bin", port: first.listeningPort()) == 201)
    try await first.waitForEvent("forwardFailed")
    first.send(SIGTERM)
    #expect(try await first.waitForExit() == 0)

    // Another delivery of the batch holds its lock.
    let lockPath = folder.path("staging/outbox/1/.browserdrop-lock").path
    let lock = Glibc.open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
    try #require(lock >= 0, "open \(lockPath): errno \(errno)")
    try #require(flock(lock, LOCK_EX | LOCK_NB) == 0)
    var locked = true
    defer { if locked { Glibc.close(lock) } }

    let destination = folder.path("dest")
    let second = try CommandProcess(common + ["--to", destination.path])
    defer { Task { await second.stop() } }
    let busy = try await second.waitForEvent("forwardFailed")
    #expect(
      busy.string("message")?.contains("Another delivery of this folder is running") == true,
      "\(busy)")
    try await second.waitForEvent("retrying")
    #expect(!second.events.contains { $0.event == "forwarded" })
    Glibc.close(lock)
    locked = false

    let forwarded = try await second.waitForEvent("forwarded", timeout: 30)
    #expect(forwarded.int("files") == 1)
    let delivered = try FileManager.default.contentsOfDirectory(
      atPath: destination.appending(path: "intake").path)
    #expect(delivered == ["f.bin"])
    #expect(
      FileManager.default.contents(atPath: destination.appending(path: "intake/f.bin").path)
        == (try Data(contentsOf: file)))
    second.send(SIGTERM)
    #expect(try await second.waitForExit() == 0)
  }
}

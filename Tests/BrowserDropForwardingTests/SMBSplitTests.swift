import BrowserDropTestSupport
import Foundation
import Glibc
import Testing

@testable import BrowserDropForwarding

/// Files of at least ``SMBFileSystem/splitThreshold`` bytes go over two connections, the second
/// in a forked writer child. Serialized, and the only suite that sends files that large, so a
/// writer child of this process seen here is one of these tests'.
@Suite(.serialized)
struct SMBSplitTests {
  /// Both stripe parities for the partial last stripe: 9 full stripes + a tail (the tail is the
  /// child's, stripe 9) and 10 + a tail (this process's, stripe 10).
  private static let files: [String: Data] = [
    "odd tail.bin": bytes((72 << 20) + 777, seed: 31),
    "even tail.bin": bytes((80 << 20) + 12_345, seed: 32),
    "small.txt": Data("small".utf8),
  ]

  @Test func largeFilesArriveByteIdenticalOverTwoConnections() async throws {
    let server = try TestSMBServer.fromEnvironment()
    let scratch = try Scratch()
    defer { scratch.remove() }
    let source = try scratch.folder("drop", Self.files)
    let folder = uniqueName("split")
    // The password share: the child signs in with the same credentials.
    let destination = try server.destination(
      "private", folder, credentials: Credentials(username: "dropper", password: "s3cret"))
    let seen = Observations()
    let report = try await Forwarder().forward(folder: source, to: destination) { progress in
      await seen.record(progress.completedBytes, writers: writerChildren().count)
    }
    let arrived = server.directory("private").appendingPathComponent(folder)
    #expect(try contents(of: arrived) == Self.files)
    #expect(report.bytesSent == Int64(Self.files.values.map(\.count).reduce(0, +)))
    #expect(await seen.sawWriter)
    #expect(await seen.monotonic)
    #expect(await seen.last == Int64(Self.files.values.map(\.count).reduce(0, +)))
    #expect(writerChildren().isEmpty)
  }

  @Test func aWriterChildKilledBySomeoneElseIsReplacedByTheParent() async throws {
    let server = try TestSMBServer.fromEnvironment()
    let scratch = try Scratch()
    defer { scratch.remove() }
    let files = ["big.bin": bytes(256 << 20, seed: 35)]
    let source = try scratch.folder("drop", files)
    let folder = uniqueName("split-killed")
    let seen = Observations()
    // As an OOM killer or an operator might: the parent must send the child's stripes.
    let killer = WriterSignaller(SIGKILL)
    let report = try await Forwarder().forward(
      folder: source, to: server.destination("guest", folder)
    ) { progress in
      await seen.record(progress.completedBytes, writers: 0)
    }
    #expect(killer.finish())
    #expect(try contents(of: server.directory("guest").appendingPathComponent(folder)) == files)
    #expect(report.resumedFiles == 0)
    #expect(await seen.monotonic)
    #expect(writerChildren().isEmpty)
  }

  @Test func aWriterChildThatHangsIsKilledAndReplaced() async throws {
    let server = try TestSMBServer.fromEnvironment()
    let scratch = try Scratch()
    defer { scratch.remove() }
    let files = ["big.bin": bytes(256 << 20, seed: 36)]
    let source = try scratch.folder("drop", files)
    let folder = uniqueName("split-stopped")
    // With a 2 s request timeout the parent gives a silent child 2 × 2 + 5 = 9 s.
    let destination = try server.destination(
      "guest", folder, options: SMBOptions(timeout: .seconds(2)))
    let started = ContinuousClock.now
    // SIGSTOP: stuck where no libsmbclient timeout reaches, as on a lock held at the fork.
    let stopper = WriterSignaller(SIGSTOP)
    let report = try await Forwarder().forward(folder: source, to: destination)
    #expect(stopper.finish())
    #expect(ContinuousClock.now - started > .seconds(8))
    #expect(try contents(of: server.directory("guest").appendingPathComponent(folder)) == files)
    #expect(report.resumedFiles == 0)
    #expect(writerChildren().isEmpty)
  }

  @Test func smbdStoppedMidSplitTransferThenResumed() async throws {
    try await stopSMBDMidTransferThenResume(largeFile: (80 << 20) + 12_345)
    #expect(writerChildren().isEmpty)
  }

  @Test func fullShareDuringSplitTransfer() async throws {
    let server = try TestSMBServer.fromEnvironment()
    try await SMBFailureTests.TinyShare.withTinyShare(server) { tiny in
      let scratch = try Scratch()
      defer { scratch.remove() }
      let folder = uniqueName("split-full")
      let own = tiny.appendingPathComponent(folder)
      try FileManager.default.createDirectory(
        at: own, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o777])
      defer { try? FileManager.default.removeItem(at: own) }
      // More than the 20 MiB share holds, and large enough to be split.
      let source = try scratch.folder("drop", ["big.bin": bytes((64 << 20) + 1, seed: 34)])
      let failure = await #expect(throws: ForwardFailure.self) {
        try await Forwarder().forward(
          folder: source, to: server.destination("tiny", folder + "/drop"))
      }
      #expect(failure?.kind == .destinationFull)
      #expect(
        failure?.description == "The share “tiny” on 127.0.0.1 is full — “big.bin” didn't fit. "
          + "Free up space there, then forward again.")
      #expect(writerChildren().isEmpty)
      // The temporary file is gone again, whichever of the two writers ran out of space first.
      #expect(try contents(of: own.appendingPathComponent("drop")).isEmpty)
    }
  }

  @Test func cancelledSplitDeliveryLeavesNoWriterNorTemporaryFile() async throws {
    let server = try TestSMBServer.fromEnvironment()
    let scratch = try Scratch()
    defer { scratch.remove() }
    let files = ["big.bin": bytes(256 << 20, seed: 33)]
    let source = try scratch.folder("drop", files)
    let folder = uniqueName("split-cancel")
    let destination = try server.destination("guest", folder)
    let (reached, signal) = AsyncStream<Bool>.makeStream()
    await withThrowingTaskGroup(of: Void.self) { group in
      group.addTask {
        _ = try await Forwarder().forward(folder: source, to: destination) { progress in
          guard progress.currentFile == "big.bin", progress.completedBytes > 0 else { return }
          signal.yield(!writerChildren().isEmpty)
          // Hold the delivery here until the test cancels it (bounded).
          try? await Task.sleep(for: .seconds(30))
        }
      }
      for await writerRunning in reached {
        #expect(writerRunning)
        break
      }
      group.cancelAll()
      await #expect(throws: CancellationError.self) { try await group.next() }
    }
    // Killed and reaped before the cancellation reached us: no process, not even a zombie.
    #expect(writerChildren().isEmpty)
    let arrived = server.directory("guest").appendingPathComponent(folder)
    #expect(try FileManager.default.contentsOfDirectory(atPath: arrived.path).isEmpty)

    let report = try await Forwarder().forward(folder: source, to: destination)
    #expect(try contents(of: arrived) == files)
    #expect(report.resumedFiles == 0)
    #expect(writerChildren().isEmpty)
  }
}

/// What a delivery's progress callback saw.
private actor Observations {
  private(set) var sawWriter = false
  private(set) var monotonic = true
  private(set) var last: Int64 = 0

  func record(_ bytes: Int64, writers: Int) {
    if writers > 0 { sawWriter = true }
    if bytes < last { monotonic = false }
    last = bytes
  }
}

/// Sends a signal to the first running writer child that appears, from a thread of its own
/// polling `/proc` every millisecond: a progress callback comes too late when other suites keep
/// the cooperative pool busy (the child had written all its stripes by then).
/// `@unchecked Sendable`: the state is only touched while `lock` is held.
final class WriterSignaller: @unchecked Sendable {
  private let lock = NSLock()
  private var done = false
  private var signalled = false

  init(_ number: Int32) {
    Thread { [self] in
      while true {
        lock.lock()
        let stop = done
        lock.unlock()
        if stop { return }
        let children = writerChildren(running: true)
        if !children.isEmpty {
          for pid in children { kill(pid, number) }
          lock.lock()
          signalled = true
          done = true
          lock.unlock()
          return
        }
        usleep(1000)
      }
    }.start()
  }

  /// Stops polling; whether a running writer child got the signal.
  func finish() -> Bool {
    lock.lock()
    defer { lock.unlock() }
    done = true
    return signalled
  }
}

/// PIDs of this process's writer children (`bd-smb-writer`), zombies included unless `running`.
func writerChildren(running: Bool = false) -> [pid_t] {
  let me = getpid()
  guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else {
    return []
  }
  return entries.compactMap { entry -> pid_t? in
    guard let pid = pid_t(entry),
      let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
      let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")")
    else { return nil }
    let name = stat[stat.index(after: open)..<close]
    // After the name: state, then the parent's PID.
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard name == "bd-smb-writer", fields.count > 1, pid_t(fields[1]) == me,
      !running || fields[0] != "Z"
    else { return nil }
    return pid
  }
}

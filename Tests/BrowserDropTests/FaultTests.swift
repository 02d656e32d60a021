import BrowserDropTestSupport
import Foundation
import Glibc
import Testing

@testable import BrowserDrop

/// Faults: clients that vanish mid-body, and a staging volume that is too small or fills up
/// while a file arrives. Nothing partial is ever listed or handed over.
@Suite("Faults: dropped bodies and full disks")
struct FaultTests {
  /// A small deterministic generator, so a failing trial can be replayed from its seed.
  struct SeededRandom: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
      state &+= 0x9E37_79B9_7F4A_7C15
      var z = state
      z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
      z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
      return z ^ (z >> 31)
    }
  }

  static func count(_ events: [Event], _ match: (Event) -> Bool) -> Int {
    events.filter(match).count
  }

  @Test func twoHundredDropsAtRandomOffsetsLeaveNothingAndTheRetrySucceeds() async throws {
    let seed: UInt64 = 0x00B0_D0B0
    var random = SeededRandom(state: seed)
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let trials = 200
    var expected: [String: [UInt8]] = [:]
    for trial in 0..<trials {
      let size = Int.random(in: 1...(256 * 1024), using: &random)
      let offset = Int.random(in: 0..<size, using: &random)
      let path = "drops/\(trial % 7)/file-\(trial).bin"
      let body = TestBytes.make(size, seed: UInt64(trial) + 1)
      let client = try await session.client()
      try await client.send(
        Requests.uploadHead(port: session.port, encodedPath: path, length: size))
      if offset > 0 { try await client.send(Array(body[..<offset])) }
      try await session.log.wait {
        Self.count($0) { if case .uploadStarted = $0 { true } else { false } } == 2 * trial + 1
      }
      client.socket.close()
      let events = try await session.log.wait {
        Self.count($0) { if case .uploadFailed = $0 { true } else { false } } == trial + 1
      }
      let failure = events.last { if case .uploadFailed = $0 { true } else { false } }
      #expect(
        failure
          == .uploadFailed(
            Upload(id: UInt64(2 * trial + 1), relativePath: path, size: size),
            .connectionLost), "trial \(trial), seed \(seed), size \(size), offset \(offset)")
      #expect(session.incomingEntries().isEmpty, "trial \(trial): a partial file is left")
      #expect(!(await session.server.receivedFiles.contains { $0.relativePath == path }))
      #expect(session.stagedFiles()[path] == nil, "trial \(trial): listed before complete")
      // The same path again, whole: it succeeds.
      let retry = try await session.upload(path, body)
      #expect(retry.status == 201, "trial \(trial): retry got \(retry.status)")
      expected[path] = body
    }
    let received = await session.server.receivedFiles
    #expect(received.count == trials)
    #expect(await session.log.failed.count == trials)
    let folder = try #require(try await session.server.finish())
    defer { try? FileManager.default.removeItem(at: folder) }
    var handedOver = 0
    let walker = FileManager.default.enumerator(atPath: folder.path)
    while let relative = walker?.nextObject() as? String {
      var isDirectory: ObjCBool = false
      _ = FileManager.default.fileExists(
        atPath: folder.path + "/" + relative, isDirectory: &isDirectory)
      if isDirectory.boolValue { continue }
      handedOver += 1
      let bytes = FileManager.default.contents(atPath: folder.path + "/" + relative).map(Array.init)
      #expect(bytes == expected[relative], "\(relative) handed over but not as sent")
    }
    #expect(handedOver == trials)
  }

  /// A 64 MiB tmpfs mounted for the test (root only; scripts/test.sh runs as root in CI).
  struct SmallVolume {
    let mountPoint: URL

    init(megabytes: Int) throws {
      guard geteuid() == 0 else {
        let message =
          "FaultTests needs root to mount a \(megabytes) MiB tmpfs; run it as root "
          + "(scripts/test.sh does)."
        Issue.record(Comment(rawValue: message))
        throw CancellationError()
      }
      mountPoint = FileManager.default.temporaryDirectory.appending(path: "bd-tmpfs-\(UUID())")
      try FileManager.default.createDirectory(at: mountPoint, withIntermediateDirectories: true)
      let result = mount("tmpfs", mountPoint.path, "tmpfs", 0, "size=\(megabytes)m,mode=0700")
      guard result == 0 else {
        let reason = String(cString: strerror(errno))
        try? FileManager.default.removeItem(at: mountPoint)
        Issue.record(Comment(rawValue: "mounting a tmpfs at \(mountPoint.path) failed: \(reason)"))
        throw CancellationError()
      }
    }

    func unmount() {
      if umount2(mountPoint.path, 0) != 0 { umount2(mountPoint.path, Int32(MNT_DETACH)) }
      try? FileManager.default.removeItem(at: mountPoint)
    }

    var freeBytes: Int {
      var info = statvfs()
      statvfs(mountPoint.path, &info)
      return Int(info.f_bavail) * Int(info.f_frsize)
    }
  }

  @Test func aFullDiskRefusesEarlyOrFailsCleanlyAndKeepsWhatArrived() async throws {
    let volume = try SmallVolume(megabytes: 64)
    defer { volume.unmount() }
    let reserve = 1 << 20
    let session = try await TestSession.start {
      $0.stagingRoot = volume.mountPoint.appending(path: "staging")
      $0.reservedFreeSpace = reserve
    }
    do {
      let kept = TestBytes.make(8 << 20, seed: 7)
      #expect(try await session.upload("kept/first.bin", kept).status == 201)

      // Too big for what is left: 507 before a single body byte is sent.
      let tooBig = try await session.client()
      try await tooBig.send(
        Requests.uploadHead(
          port: session.port, encodedPath: "big.bin", length: 60 << 20,
          extra: ["Expect: 100-continue"]))
      let refused = try await tooBig.readReply()
      #expect(refused.status == 507 && refused.errorCode == "insufficient_storage")

      // Fits when admitted; then another process fills the disk while the body arrives.
      let size = 30 << 20
      let body = TestBytes.make(size, seed: 9)
      let client = try await session.client()
      try await client.send(
        Requests.uploadHead(port: session.port, encodedPath: "late/second.bin", length: size))
      try await client.send(Array(body[..<(4 << 20)]))
      try await session.log.wait {
        $0.contains {
          if case .uploadStarted(let u) = $0 { u.relativePath == "late/second.bin" } else { false }
        }
      }
      let filler = volume.mountPoint.path + "/filler"
      let fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
      #expect(fd >= 0)
      let chunk = [UInt8](repeating: 0xAB, count: 1 << 20)
      for _ in 0..<64 where write(fd, chunk, chunk.count) == chunk.count {}
      close(fd)
      #expect(volume.freeBytes < 1 << 20)
      try? await client.send(Array(body[(4 << 20)...]))
      let reply = try await client.readReply()
      #expect(reply.status == 500 && reply.errorCode == "write_failed")
      let events = try await session.log.wait {
        $0.contains { if case .uploadFailed = $0 { true } else { false } }
      }
      #expect(
        events.contains {
          if case .uploadFailed(_, .insufficientStorage) = $0 { true } else { false }
        })
      #expect(session.incomingEntries().isEmpty, "the partial file was not removed")
      #expect(session.stagedFiles() == ["kept/first.bin": kept])
      #expect(await session.server.receivedFiles.map(\.relativePath) == ["kept/first.bin"])
      // Space back: the same path now succeeds.
      unlink(filler)
      let small = TestBytes.make(1 << 20, seed: 11)
      #expect(try await session.upload("late/second.bin", small).status == 201)
    } catch {
      Issue.record(error)
    }
    await session.server.cancel()
  }
}

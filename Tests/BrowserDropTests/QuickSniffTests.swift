import BrowserDropSystem
import Foundation
import Glibc
import Testing

@testable import BrowserDrop

/// ``ContentInspector/quickFinding(fd:fileExtension:)``: the answer a small upload gets without
/// the trip to the blocking pool must be the one the pool would give, and everything that needs
/// libmagic's whole database must still go there.
struct QuickSniffTests {
  let inspector: ContentInspector

  init() throws {
    inspector = ContentInspector(policy: .rejectDisguised, sniffer: try ContentSniffer())
  }

  /// The finding for `bytes` stored as a file with `fileExtension`: the quick one (or `nil`),
  /// and the blocking pool's.
  func findings(
    _ bytes: [UInt8], fileExtension: String
  ) async throws -> (quick: ContentInspector.Finding?, pool: ContentInspector.Finding) {
    let path = FileManager.default.temporaryDirectory
      .appending(path: "quick-sniff-\(UUID().uuidString)").path
    try Data(bytes).write(to: URL(filePath: path))
    defer { unlink(path) }
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    try #require(fd >= 0)
    defer { close(fd) }
    let quick = inspector.quickFinding(fd: fd, fileExtension: fileExtension)
    let inspector = self.inspector
    let pool = await BlockingPool.shared.run {
      inspector.inspect(fd: fd, fileExtension: fileExtension)
    }
    return (quick, pool)
  }

  /// Random binary bodies of small-upload sizes: almost all answered at once, each answer the
  /// pool's.
  @Test func randomBodiesAreAnsweredAtOnceAsThePoolWould() async throws {
    var generator = SystemRandomNumberGenerator()
    var quickCount = 0
    let count = 200
    for index in 0..<count {
      let length = [1_024, 4_096, 16_384, 65_536][index % 4]
      let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
      let (quick, pool) = try await findings(bytes, fileExtension: "bin")
      if let quick {
        quickCount += 1
        #expect(quick == pool, "\(length) bytes")
      }
    }
    #expect(quickCount >= count * 9 / 10, "\(quickCount) of \(count) answered at once")
  }

  /// Text, known formats and executables need the whole database (and an executable under a
  /// media name must still be refused): none is answered at once.
  @Test func wholeDatabaseContentGoesToThePool() async throws {
    let text = Array(
      String(repeating: "The quick brown fox jumps over the lazy dog.\n", count: 50).utf8)
    let png: [UInt8] =
      [
        0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F,
        0x15, 0xC4, 0x89,
      ] + [UInt8](repeating: 0, count: 200)
    let elf = try [UInt8](Data(contentsOf: URL(filePath: "/bin/true")))
    for (bytes, name) in [(text, "txt"), (png, "png"), (elf, "mp3")] {
      let (quick, pool) = try await findings(bytes, fileExtension: name)
      #expect(quick == nil, "\(name): \(String(describing: quick))")
      if name == "mp3" { #expect(pool.refusal != nil) }
    }
  }

  /// With sniffing off there is nothing to wait for.
  @Test func noSniffingIsAlwaysQuick() async throws {
    let off = ContentInspector(policy: .off, sniffer: nil)
    let finding = off.quickFinding(fd: -1, fileExtension: "bin")
    #expect(finding == ContentInspector.Finding(mimeType: nil, kind: .other, refusal: nil))
  }
}

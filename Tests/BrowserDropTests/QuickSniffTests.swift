import BrowserDropSystem
import Foundation
import Glibc
import Testing

@testable import BrowserDrop

/// ``ContentInspector/quickFinding(fd:size:fileExtension:)``: the answer a small upload gets
/// without the trip to the blocking pool must be the one libmagic's whole database gives, and
/// everything that needs the whole database must still go to the pool.
struct QuickSniffTests {
  let sniffer: ContentSniffer

  init() throws {
    sniffer = try ContentSniffer()
  }

  /// For `bytes` stored as a file with `fileExtension` under `policy`: the quick finding (or
  /// `nil`), and the finding from libmagic's whole database alone, as before the screen.
  func findings(
    _ bytes: [UInt8], fileExtension: String, policy: ContentPolicy = .rejectDisguised
  ) throws -> (quick: ContentInspector.Finding?, whole: ContentInspector.Finding) {
    let inspector = ContentInspector(policy: policy, sniffer: sniffer)
    let path = FileManager.default.temporaryDirectory
      .appending(path: "quick-sniff-\(UUID().uuidString)").path
    try Data(bytes).write(to: URL(filePath: path))
    defer { unlink(path) }
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    try #require(fd >= 0)
    defer { close(fd) }
    let quick = inspector.quickFinding(fd: fd, size: bytes.count, fileExtension: fileExtension)
    let whole = bytes.withUnsafeBytes {
      inspector.finding(for: sniffer.sniffWithWholeDatabase($0), fileExtension: fileExtension)
    }
    return (quick, whole)
  }

  static func random(_ count: Int, after start: [UInt8] = []) -> [UInt8] {
    var generator = SystemRandomNumberGenerator()
    return start + (start.count..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
  }

  /// Random binary bodies up to the limit: almost all answered at once, each answer the whole
  /// database's. Bodies over the limit always go to the pool.
  @Test func randomBodiesAreAnsweredAtOnceAsTheWholeDatabaseWould() throws {
    var quickCount = 0
    let count = 200
    for index in 0..<count {
      let length = [1_024, 4_096, 8_192, ContentInspector.quickSniffLimit][index % 4]
      let (quick, whole) = try findings(Self.random(length), fileExtension: "bin")
      if let quick {
        quickCount += 1
        #expect(quick == whole, "\(length) bytes")
      }
    }
    #expect(quickCount >= count * 9 / 10, "\(quickCount) of \(count) answered at once")
    let over = try findings(Self.random(ContentInspector.quickSniffLimit + 1), fileExtension: "bin")
    #expect(over.quick == nil)
  }

  /// Binary formats the small databases know (MPEG audio frames, ADTS AAC) come out as the
  /// whole database says, and a strict policy refuses them on the quick path as it would on the
  /// pool.
  @Test func knownWeakFormatsAndRefusalsMatchTheWholeDatabase() throws {
    let bodies: [(String, [UInt8])] = [
      ("mp3", Self.random(4_096, after: [0xFF, 0xFB, 0x90, 0x00])),
      ("aac", Self.random(4_096, after: [0xFF, 0xF1, 0x50, 0x80])),
    ]
    var answered = 0
    for (name, bytes) in bodies {
      for policy in [ContentPolicy.rejectDisguised, .strict(allowedTypes: ["image/*"])] {
        let (quick, whole) = try findings(bytes, fileExtension: name, policy: policy)
        guard let quick else { continue }
        answered += 1
        #expect(quick == whole, "\(name), \(policy)")
        #expect(quick.mimeType != "application/octet-stream", "\(name): \(quick)")
        if case .strict = policy { #expect(quick.refusal != nil, "\(name)") }
      }
    }
    #expect(answered == 4, "the small databases answered \(answered) of 4")
  }

  /// Text, known formats and executables need the whole database (and an executable under a
  /// media name must still be refused there): none is answered at once.
  @Test func wholeDatabaseContentGoesToThePool() throws {
    let text = Array(
      String(repeating: "The quick brown fox jumps over the lazy dog.\n", count: 50).utf8)
    let png: [UInt8] =
      [
        0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F,
        0x15, 0xC4, 0x89,
      ] + [UInt8](repeating: 0, count: 200)
    let elf = Array(try Data(contentsOf: URL(filePath: "/bin/true")).prefix(8_192))
    for (bytes, name) in [(text, "txt"), (png, "png"), (elf, "mp3")] {
      let (quick, whole) = try findings(bytes, fileExtension: name)
      #expect(quick == nil, "\(name): \(String(describing: quick))")
      if name == "mp3" { #expect(whole.refusal != nil) }
    }
  }

  /// With sniffing off there is nothing to wait for.
  @Test func noSniffingIsAlwaysQuick() {
    let off = ContentInspector(policy: .off, sniffer: nil)
    let finding = off.quickFinding(fd: -1, size: 10, fileExtension: "bin")
    #expect(finding == ContentInspector.Finding(mimeType: nil, kind: .other, refusal: nil))
  }
}

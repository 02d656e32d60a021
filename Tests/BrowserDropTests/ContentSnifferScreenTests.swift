import Foundation
import Testing

@testable import BrowserDrop

/// The soft-magic screen (``SoftMagicScreen``): every answer it gives must be the one libmagic
/// gives with the whole database, as the sniffer asked it before.
struct ContentSnifferScreenTests {
  let sniffer: ContentSniffer

  init() throws {
    sniffer = try ContentSniffer()
  }

  /// On this machine's libmagic (5.44, Debian 12) and database the screen is in use. With any
  /// other release it is off by design, and this test says so: the screen's reading of
  /// libmagic's matching code must be checked again before it is trusted there.
  @Test func theScreenIsInUseWithThisLibmagic() throws {
    let residual = try #require(
      sniffer.residual, "the screen is off: libmagic is not 5.44 or the database is not mapped")
    let counts = residual.screen.ruleCounts
    #expect(counts.strong > 2_500, "\(counts)")
    #expect(counts.weak + counts.unscreened < 250, "\(counts)")
    print("screen: \(counts.strong) strong, \(counts.weak) weak, \(counts.unscreened) unscreened")
    // Benchmarks/sniff-callgrind.sh counts libmagic's instructions on the two small databases.
    if let folder = ProcessInfo.processInfo.environment["SNIFF_DATABASES_DIR"] {
      let database = try #require(MappedDatabase(for: nil))
      let magic = try #require(
        CompiledMagic(base: UnsafeRawPointer(database.base), size: database.size))
      var screen = try #require(SoftMagicScreen(magic))
      let databases = screen.takeDatabases()
      try Data(databases.residual).write(to: URL(filePath: folder).appending(path: "residual.mgc"))
      try Data(databases.unscreened).write(
        to: URL(filePath: folder).appending(path: "unscreened.mgc"))
    }
  }

  /// Building the screen while the mapping drops the pages each pass has gone past gives the
  /// same screen: the same databases, counts and verdicts; every record is handed over.
  @Test func droppingPagesWhileBuildingChangesNothing() throws {
    let database = try #require(MappedDatabase(for: nil))
    let magic = try #require(
      CompiledMagic(base: UnsafeRawPointer(database.base), size: database.size))
    var kept = try #require(SoftMagicScreen(magic))
    var handedOver = 0
    var dropped = try #require(
      SoftMagicScreen(
        magic,
        release: { records in
          handedOver += records.count
          ResidualLibmagic.release(records, of: database)
        }))
    // Both passes over set 0, and set 1 once.
    #expect(handedOver == 2 * magic.walkedCount + magic.namedCount)
    #expect(kept.ruleCounts == dropped.ruleCounts && kept.minimumLength == dropped.minimumLength)
    var generator = SeededGenerator(seed: 0xD20B)
    for _ in 0..<200 {
      let body = generator.bytes(16_384)
      body.withUnsafeBytes { #expect(kept.verdict($0) == dropped.verdict($0)) }
    }
    let before = kept.takeDatabases()
    let after = dropped.takeDatabases()
    #expect(before.residual == after.residual && before.unscreened == after.unscreened)
  }

  /// Random bodies of every length up to 64 KiB, most of them binary: the sniffer's answer is
  /// the whole database's answer, and almost every 16 KiB body is answered without it.
  @Test func randomBodiesGetTheWholeDatabasesAnswer() async throws {
    let sniffer = self.sniffer
    let residual = try #require(sniffer.residual)
    let report = await offTheCooperativePool { () -> ScreenReport in
      var generator = SeededGenerator(seed: 0x5C2E_E4ED)
      var report = ScreenReport()
      for index in 0..<4_000 {
        let length =
          index % 2 == 0
          ? 16_384 : Int.random(in: 0...ContentSniffer.prefixLength, using: &generator)
        let body = generator.bytes(length)
        report.check(body, sniffer: sniffer, residual: residual, label: "random \(index)")
      }
      return report
    }
    #expect(report.mismatches.isEmpty, "\(report.mismatches.prefix(5))")
    #expect(report.differentFromUnknown > 0, "libmagic's weak guesses should occur")
    let cleared = report.verdicts[.residual, default: 0] + report.verdicts[.unscreened, default: 0]
    #expect(Double(cleared) / Double(report.total) > 0.97, "\(report.verdicts)")
    // Most random bodies wake no weak rule's printing line: the unscreened rules answer.
    #expect(
      report.verdicts[.unscreened, default: 0] > report.verdicts[.residual, default: 0],
      "\(report.verdicts)")
    print(
      "random bodies: \(report.total), \(report.verdicts), not unknown to libmagic: "
        + "\(report.differentFromUnknown)")
  }

  /// Every top-level test of the database planted in random data at its offset (the value of
  /// every equality, string and search): each rule's first test then matches, and the answer
  /// must still be the whole database's.
  @Test func plantedSignaturesGetTheWholeDatabasesAnswer() async throws {
    let sniffer = self.sniffer
    let residual = try #require(sniffer.residual)
    let database = try #require(MappedDatabase(for: nil))
    let report = await offTheCooperativePool { () -> ScreenReport in
      let magic = CompiledMagic(base: UnsafeRawPointer(database.base), size: database.size)!
      var generator = SeededGenerator(seed: 0x91A7_7ED5)
      var report = ScreenReport()
      for rule in magic.walkedRules {
        let entry = magic.entry(rule.lowerBound)
        guard let planted = Self.plant(entry, using: &generator) else { continue }
        report.check(planted, sniffer: sniffer, residual: residual, label: "rule at \(rule)")
      }
      return report
    }
    #expect(report.mismatches.isEmpty, "\(report.mismatches.prefix(5))")
    #expect(report.total > 2_500)
    // A strong rule that may match gets the whole database or a copy of itself in a small one.
    let withStrongRules =
      report.verdicts[.strongRules(onResidual: false), default: 0]
      + report.verdicts[.strongRules(onResidual: true), default: 0]
    #expect(withStrongRules > 2_500, "\(report.verdicts)")
    print("planted signatures: \(report.total), \(report.verdicts)")
  }

  /// A test's key byte (the byte the screen looks it up by instead of running it) is one every
  /// match has: with each rule's value planted in random data, every test that may match there
  /// finds its key byte in place, masked integers (keyed by a later byte) included.
  @Test func everyMatchHasItsKeyByte() throws {
    let database = try #require(MappedDatabase(for: nil))
    let magic = try #require(
      CompiledMagic(base: UnsafeRawPointer(database.base), size: database.size))
    var generator = SeededGenerator(seed: 0x4B45)
    var checked = 0
    var keyedPastTheStart = 0
    for rule in magic.walkedRules {
      let entry = magic.entry(rule.lowerBound)
      guard let test = SoftMagicTest(entry), let key = test.key,
        let planted = Self.plant(entry, using: &generator)
      else { continue }
      planted.withUnsafeBytes { bytes in
        guard test.mayMatch(bytes) else { return }
        checked += 1
        if key.position != Int(entry.offset) { keyedPastTheStart += 1 }
        #expect(bytes[key.position] == key.byte, "rule at \(rule)")
      }
    }
    #expect(checked > 2_500)
    #expect(keyedPastTheStart > 50, "the masked a.out and SPARC tests")
  }

  /// Every line of every rule the screen may leave out, its ancestors' values and its own planted
  /// in random data (each a line that prints, sets a MIME type or does more than compare, and
  /// so decides whether the rule acts): the answer is still the whole database's, whichever
  /// small database the screen picks.
  @Test func plantedRulePathsGetTheWholeDatabasesAnswer() async throws {
    let sniffer = self.sniffer
    let residual = try #require(sniffer.residual)
    let database = try #require(MappedDatabase(for: nil))
    let report = await offTheCooperativePool { () -> ScreenReport in
      let magic = CompiledMagic(base: UnsafeRawPointer(database.base), size: database.size)!
      var generator = SeededGenerator(seed: 0xEFFE_C75)
      var report = ScreenReport()
      for rule in magic.walkedRules {
        let top = magic.entry(rule.lowerBound)
        guard top.flags & MagicEntry.Flag.binaryTest != 0,
          let test = SoftMagicTest(top), test.strength < SoftMagicScreen.strengthThreshold
        else { continue }
        var stack: [Int] = []
        for index in rule {
          let entry = magic.entry(index)
          stack.removeLast(max(0, stack.count - entry.level))
          stack.append(index)
          guard entry.hasDescription || entry.hasMIMEType || entry.type == 46 else { continue }
          var body = generator.bytes(16_384)
          for line in stack { _ = Self.plant(magic.entry(line), into: &body) }
          report.check(body, sniffer: sniffer, residual: residual, label: "line \(index)")
        }
      }
      return report
    }
    #expect(report.mismatches.isEmpty, "\(report.mismatches.prefix(5))")
    #expect(report.total > 500)
    print("planted rule paths: \(report.total), \(report.verdicts)")
  }

  /// libmagic reads a buffer as text unless a NUL byte comes before its last non-NUL byte and
  /// no byte-order mark or UTF-7 signature starts it.
  @Test func onlyBinaryDataIsScreened() {
    func binary(_ bytes: [UInt8]) -> Bool {
      bytes.withUnsafeBytes { BinaryContent.looksBinaryToLibmagic($0) }
    }
    let text = Array("plain words\n".utf8)
    #expect(!binary(text))
    #expect(!binary(text + [0, 0, 0]), "trailing NULs are trimmed before the text pass")
    #expect(binary(text + [0, 0x41]))
    #expect(binary([0x41, 0, 0x42, 0x43]))
    #expect(!binary([0xFF, 0xFE, 0x41, 0, 0x42, 0]), "UTF-16 LE after a BOM")
    #expect(!binary([0xFE, 0xFF, 0, 0x41, 0, 0x42]), "UTF-16 BE after a BOM")
    #expect(!binary([0, 0, 0xFE, 0xFF, 0, 0, 0, 0x41]), "UTF-32 BE after a BOM")
    #expect(!binary([0xEF, 0xBB, 0xBF, 0x41, 0, 0x42]), "UTF-8 after a BOM")
    #expect(!binary(Array("+/v8 x".utf8) + [0, 0x41]), "UTF-7 signature")
    #expect(!binary([0, 0x41]), "too short to judge")
  }

  /// Text still goes to the whole database; binary data of known formats to a small database
  /// with their rules copied in, or to the whole one (short buffers), with the same answer.
  @Test func textAndKnownFormatsGetTheirRules() throws {
    let residual = try #require(sniffer.residual)
    for body in [ContentFixtures.asciiText(), ContentFixtures.utf8Text(), ContentFixtures.json()] {
      #expect(body.withUnsafeBytes { residual.verdict($0) } == .wholeDatabase)
      #expect(sniffer.sniff(body) == body.withUnsafeBytes { sniffer.sniffWithWholeDatabase($0) })
    }
    for body in [
      ContentFixtures.png(), ContentFixtures.pdf(), ContentFixtures.wav(), ContentFixtures.zip(),
      ContentFixtures.gzip(), try ContentFixtures.elf(),
    ] {
      let verdict = body.withUnsafeBytes { residual.verdict($0) }
      #expect(verdict != .residual && verdict != .unscreened, "\(body.prefix(8))")
      #expect(sniffer.sniff(body) == body.withUnsafeBytes { sniffer.sniffWithWholeDatabase($0) })
    }
  }

  /// Random 16 KiB bodies, each different, as the peers harness sends them: about 1 in 200 has
  /// a strong rule that may match, and gets a small database with that rule copied in. Every
  /// answer is the whole database's, and nearly none of these bodies needs the whole database.
  @Test func randomBodiesWithStrongRulesGetTheWholeDatabasesAnswer() async throws {
    let sniffer = self.sniffer
    let residual = try #require(sniffer.residual)
    let report = await offTheCooperativePool { () -> ScreenReport in
      var generator = SeededGenerator(seed: 0x0018_2026)
      var report = ScreenReport()
      var bodies = 0
      while report.total < 150 && bodies < 100_000 {
        bodies += 1
        let body = generator.bytes(16_384)
        let verdict = body.withUnsafeBytes { residual.verdict($0) }
        if verdict != .residual && verdict != .unscreened {
          report.check(body, sniffer: sniffer, residual: residual, label: "body \(bodies)")
        }
      }
      report.bodies = bodies
      return report
    }
    #expect(report.mismatches.isEmpty, "\(report.mismatches.prefix(5))")
    #expect(report.total == 150, "\(report.bodies) bodies")
    #expect(report.verdicts[.wholeDatabase, default: 0] < 15, "\(report.verdicts)")
    print(
      "random bodies with strong rules: \(report.total) of \(report.bodies), \(report.verdicts)")
  }

  /// Two to four rules' first values planted at once in random data, so that several strong
  /// rules are copied into one small database in their order, with the named rules each uses.
  @Test func severalPlantedSignaturesGetTheWholeDatabasesAnswer() async throws {
    let sniffer = self.sniffer
    let residual = try #require(sniffer.residual)
    let database = try #require(MappedDatabase(for: nil))
    let report = await offTheCooperativePool { () -> ScreenReport in
      let magic = CompiledMagic(base: UnsafeRawPointer(database.base), size: database.size)!
      let rules = magic.walkedRules.filter {
        magic.entry($0.lowerBound).flags & MagicEntry.Flag.binaryTest != 0
      }
      var generator = SeededGenerator(seed: 0x5E7E_2A1)
      var report = ScreenReport()
      for index in 0..<1_500 {
        var body = generator.bytes(16_384)
        for _ in 0..<(2 + index % 3) {
          let rule = rules[Int.random(in: 0..<rules.count, using: &generator)]
          _ = Self.plant(magic.entry(rule.lowerBound), into: &body)
        }
        report.check(body, sniffer: sniffer, residual: residual, label: "body \(index)")
      }
      return report
    }
    #expect(report.mismatches.isEmpty, "\(report.mismatches.prefix(5))")
    print("several planted signatures: \(report.total), \(report.verdicts)")
  }

  /// A rule's value at its offset in 16 KiB of random data; `nil` for tests with no value to
  /// plant (relations, regular expressions, indirect offsets…).
  private static func plant(
    _ entry: MagicEntry, using generator: inout SeededGenerator
  ) -> [UInt8]? {
    var body = generator.bytes(16_384)
    return plant(entry, into: &body) ? body : nil
  }

  /// Writes `entry`'s value at its offset in `body`; `false` when it has none to plant.
  private static func plant(_ entry: MagicEntry, into body: inout [UInt8]) -> Bool {
    let offset = Int(entry.offset)
    guard entry.flags & 0x87 == 0, entry.relation == UInt8(ascii: "="), offset >= 0 else {
      return false
    }
    var value: [UInt8]
    switch entry.type {
    case 1: value = le(entry.number, 1)
    case 2, 10: value = le(entry.number, 2)
    case 4, 11: value = le(entry.number, 4)
    case 24, 25: value = le(entry.number, 8)
    case 7: value = le(entry.number, 2).reversed()
    case 8: value = le(entry.number, 4).reversed()
    case 26: value = le(entry.number, 8).reversed()
    case 5, 20, 49:
      value = Array(entry.value(count: entry.type == 49 ? 16 : entry.valueLength))
    default: return false
    }
    guard !value.isEmpty, offset + value.count <= body.count else { return false }
    body.replaceSubrange(offset..<(offset + value.count), with: value)
    return true
  }

  private static func le(_ number: UInt64, _ width: Int) -> [UInt8] {
    (0..<width).map { UInt8(truncatingIfNeeded: number >> (8 * UInt64($0))) }
  }
}

/// What a run of bodies through both paths found.
private struct ScreenReport: Sendable {
  var total = 0
  /// How many bodies were looked at to find the ones checked (when not all are).
  var bodies = 0
  var verdicts: [SoftMagicScreen.Verdict: Int] = [:]
  var mismatches: [String] = []
  var differentFromUnknown = 0

  mutating func check(
    _ body: [UInt8], sniffer: ContentSniffer, residual: ResidualLibmagic, label: String
  ) {
    total += 1
    body.withUnsafeBytes { bytes in
      verdicts[residual.verdict(bytes), default: 0] += 1
      let screened = sniffer.sniff(bytes)
      let whole = sniffer.sniffWithWholeDatabase(bytes)
      if whole.libmagicMimeType != SniffResult.unknownType
        && whole.libmagicMimeType != SniffResult.emptyType
      {
        differentFromUnknown += 1
      }
      if screened != whole {
        mismatches.append("\(label): \(screened.libmagicMimeType) vs \(whole.libmagicMimeType)")
      }
    }
  }
}

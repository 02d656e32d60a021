import Testing

@testable import BrowserDrop

/// The cases where the soft-magic screen must stand aside or stay cautious, shown on small
/// compiled databases built here record by record (format 18, `struct magic` of `file.h`).
struct SoftMagicHazardTests {
  /// One record of a compiled database with the fields the screen reads.
  struct Record {
    var level: UInt16 = 0
    var flags: UInt8 = 0
    var type: UInt8
    var offset: Int32 = 0
    /// A search's range (its `/N`).
    var range: UInt32 = 0
    var stringFlags: UInt32 = 0
    var value: [UInt8]
    /// Whether a top-level line is compiled as a binary test (libmagic's `BINTEST`), as every
    /// rule but those for text is.
    var binary = true

    var bytes: [UInt8] {
      var raw = [UInt8](repeating: 0, count: CompiledMagic.entrySize)
      raw[0] = UInt8(truncatingIfNeeded: level)
      raw[1] = UInt8(truncatingIfNeeded: level >> 8)
      raw[2] = flags | (level == 0 ? (binary ? 0x20 : 0x40) : 0)
      raw[4] = UInt8(ascii: "=")
      raw[5] = UInt8(value.count)
      raw[6] = type
      withUnsafeBytes(of: offset.littleEndian) { raw.replaceSubrange(12..<16, with: $0) }
      withUnsafeBytes(of: range.littleEndian) { raw.replaceSubrange(24..<28, with: $0) }
      withUnsafeBytes(of: stringFlags.littleEndian) { raw.replaceSubrange(28..<32, with: $0) }
      raw.replaceSubrange(32..<(32 + value.count), with: value)
      raw[160] = UInt8(ascii: "d")  // a description, so a match ends the walk
      return raw
    }
  }

  /// A database of `records` in set 0 (none named).
  static func database(_ records: [Record]) -> [UInt8] {
    var header = [UInt8](repeating: 0, count: CompiledMagic.entrySize)
    for (index, word) in [CompiledMagic.fileMagic, CompiledMagic.formatVersion, 0, 0].enumerated() {
      let value = index == 2 ? UInt32(records.count) : word
      withUnsafeBytes(of: value.littleEndian) {
        header.replaceSubrange((4 * index)..<(4 * index + 4), with: $0)
      }
    }
    return header + records.flatMap(\.bytes)
  }

  static func screen(_ records: [Record]) -> SoftMagicScreen? {
    let bytes = database(records)
    return bytes.withUnsafeBytes { raw -> SoftMagicScreen? in
      guard let magic = CompiledMagic(base: raw.baseAddress!, size: raw.count) else {
        Issue.record("the test database was not read")
        return nil
      }
      return SoftMagicScreen(magic)
    }
  }

  /// A top-level 16-bit string test at a relative offset can read past any buffer into bytes
  /// left by an earlier rule, which differ between the whole database and the copies: such a
  /// database gets no screen. The same test at a fixed offset is fine (the screen sends short
  /// buffers to the whole database instead).
  @Test func aTopLevelSixteenBitStringAtAMovingOffsetDisablesTheScreen() {
    let png = Record(type: 5, value: [0x89, 0x50, 0x4E, 0x47])
    for type: UInt8 in [18, 19] {  // FILE_BESTRING16, FILE_LESTRING16
      let fixed = Record(type: type, offset: 100, value: Array("ab".utf8))
      let minimumLength = Self.screen([png, fixed])?.minimumLength
      #expect(
        minimumLength.map { $0 >= 100 + 2 * 2 + 2 } ?? false, "\(String(describing: minimumLength))"
      )
      for flag: UInt8 in [0x01, 0x02, 0x80] {  // indirect, relative, from the end
        var moving = fixed
        moving.flags = flag
        let refused = Self.screen([png, moving]) == nil
        #expect(refused, "type \(type), flags \(flag)")
        // The same line as a continuation reads after its own rule's earlier tests: allowed.
        moving.level = 1
        let accepted = Self.screen([png, fixed, moving]) != nil
        #expect(accepted, "type \(type), flags \(flag)")
      }
    }
  }

  /// A continuation at a moving offset reads stale bytes only from its own rule when an
  /// ancestor copied a value first; a `search` doesn't (libmagic keeps only where it matched),
  /// so below one the bytes come from another rule, or another upload: no screen then.
  @Test func aSixteenBitStringBelowASearchDisablesTheScreen() {
    let strong = Record(type: 5, value: [0x01, 0x02, 0x03, 0x04])
    let search = Record(type: 20, range: 100, value: [0xFF])
    let number = Record(type: 1, value: [0])  // `0 byte 0`
    var below = Record(level: 1, flags: 0x02, type: 19, value: Array("ab".utf8))  // >&0 lestring16
    let belowSearch = Self.screen([strong, search, below]) == nil
    #expect(belowSearch)
    let belowNumber = Self.screen([strong, number, below]) != nil
    #expect(belowNumber)
    below.level = 2
    let grandchild = Record(level: 1, type: 20, range: 10, value: [0xFE])
    let belowSearchBelowNumber = Self.screen([strong, number, grandchild, below]) != nil
    #expect(belowSearchBelowNumber)
    // An earlier line under the same parent ran first and copied (Debian's `trace-etl`)…
    let sibling = Record(level: 1, type: 1, value: [0])
    let afterSibling = Self.screen([strong, search, sibling, grandchild, below]) != nil
    #expect(afterSibling)
    // …but one deeper in an earlier branch may not have run.
    var cousin = sibling
    cousin.level = 2
    let afterCousin = Self.screen([strong, search, grandchild, cousin, grandchild, below]) == nil
    #expect(afterCousin)
  }

  /// libmagic's pass over binary data skips the rules compiled as text tests, so the screen
  /// neither tests nor copies them: data they would match still gets a small database.
  @Test func textRulesPlayNoPartForBinaryData() throws {
    let png = Record(type: 5, value: [0x89, 0x50, 0x4E, 0x47])
    var script = Record(type: 5, value: Array("#!/bin/sh".utf8))
    script.binary = false
    let screen = try #require(Self.screen([png, script]))
    #expect(screen.ruleCounts == (1, 0, 0) as (Int, Int, Int))
    var data = [UInt8](repeating: 0, count: 128)
    data.replaceSubrange(0..<9, with: Array("#!/bin/sh".utf8))
    #expect(data.withUnsafeBytes { screen.verdict($0) } == .unscreened)
    data.replaceSubrange(0..<4, with: png.value)
    #expect(data.withUnsafeBytes { screen.verdict($0) } == .strongRules(onResidual: false))
  }

  /// A strong rule that may match is copied into the small database, unless its copy could
  /// behave differently: an `indirect` line it may reach walks the whole database; a 16-bit
  /// string below a search may read a value another rule left; one at a fixed offset past the
  /// buffer's end reads what the last test left.
  @Test func aStrongRuleIsCopiedOnlyWhereItsCopyBehavesTheSame() throws {
    let png = Record(type: 5, value: [0x89, 0x50, 0x4E, 0x47])
    var data = [UInt8](repeating: 0, count: 256)
    data.replaceSubrange(0..<4, with: png.value)
    let other = [UInt8](repeating: 0, count: 256)
    func verdicts(_ records: [Record], length: Int = 256) throws -> [SoftMagicScreen.Verdict] {
      let screen = try #require(Self.screen(records))
      return [Array(data.prefix(length)), other].map { body in
        body.withUnsafeBytes { screen.verdict($0) }
      }
    }

    #expect(try verdicts([png]) == [.strongRules(onResidual: false), .unscreened])
    let indirect = Record(level: 1, type: 41, offset: 8, value: [])
    #expect(try verdicts([png, indirect]) == [.wholeDatabase, .unscreened])

    // A search copies no value: below one, a moving 16-bit string reads another rule's.
    let search = Record(type: 20, range: 16, value: png.value)
    let belowSearch = Record(level: 1, flags: 0x02, type: 19, value: Array("ab".utf8))
    #expect(try verdicts([search]) == [.strongRules(onResidual: false), .unscreened])
    #expect(try verdicts([search, belowSearch]) == [.wholeDatabase, .unscreened])
    let belowString = Record(level: 1, flags: 0x02, type: 19, value: Array("ab".utf8))
    #expect(try verdicts([png, belowString]) == [.strongRules(onResidual: false), .unscreened])

    let fixed = Record(level: 1, type: 19, offset: 100, value: Array("ab".utf8))
    #expect(try verdicts([png, fixed]) == [.strongRules(onResidual: false), .unscreened])
    #expect(try verdicts([png, fixed], length: 105) == [.wholeDatabase, .unscreened])
  }

  /// With `/c` (a lowercase pattern byte) or `/C` (an uppercase one), libmagic compares
  /// `tolower`/`toupper` of the data in the process's locale; in ISO-8859-9 `toupper("i")` is
  /// 0xDD and `tolower("I")` is 0xFD. So a pattern byte from 0x80 up may match an ASCII byte,
  /// and the screen must not call that test failed.
  @Test func aFoldedPatternByteFromTheHighHalfMayMatchASCII() throws {
    for (stringFlags, pattern, data) in [
      (UInt32(0x08), [UInt8(0xDD), UInt8(ascii: "N")], Array("iN".utf8)),  // /C
      (UInt32(0x04), [UInt8(0xFD), UInt8(ascii: "n")], Array("In".utf8)),  // /c
    ] {
      let record = Record(type: 5, stringFlags: stringFlags, value: pattern)
      let bytes = Self.database([record])
      let test = try bytes.withUnsafeBytes { raw in
        let magic = try #require(CompiledMagic(base: raw.baseAddress!, size: raw.count))
        return try #require(SoftMagicTest(magic.entry(0)))
      }
      for candidate in [data, [pattern[0], data[1]]] {
        #expect(
          candidate.withUnsafeBytes { test.mayMatch($0) }, "\(candidate), flags \(stringFlags)")
      }
      // A byte the pattern has as it is (not a letter) still has to be there.
      let digit = Record(type: 5, stringFlags: stringFlags, value: [0xDD, 0x37])
      let digitBytes = Self.database([digit])
      let digitTest = try digitBytes.withUnsafeBytes { raw in
        let magic = try #require(CompiledMagic(base: raw.baseAddress!, size: raw.count))
        return try #require(SoftMagicTest(magic.entry(0)))
      }
      #expect(!Array("i8".utf8).withUnsafeBytes { digitTest.mayMatch($0) })
    }
  }
}

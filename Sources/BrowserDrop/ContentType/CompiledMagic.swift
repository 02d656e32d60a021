/// The entries of a compiled magic database (what `file -C` writes and libmagic maps), read in
/// place.
///
/// The file is an array of fixed-size records (`struct magic` in libmagic's `file.h`). The first
/// record is a header: a magic number, the format version and the entry count of each of the two
/// sets (set 0: the rules libmagic walks; set 1: the named rules that `use` calls). Only format 18
/// (libmagic 5.40 and later) in this machine's byte order, on a little-endian machine, is read;
/// anything else is refused, and the sniffer then runs libmagic on every upload as before.
struct CompiledMagic {
  /// The size of one record in format 18.
  static let entrySize = 376
  /// The format this reader knows.
  static let formatVersion: UInt32 = 18
  /// libmagic's magic number for a compiled database, in native byte order.
  static let fileMagic: UInt32 = 0xF11E_041C

  /// The first record (the header).
  let base: UnsafeRawPointer
  /// How many rules' records set 0 holds (top-level tests and their continuations).
  let walkedCount: Int
  /// How many records set 1 (the named rules) holds; they follow set 0.
  let namedCount: Int

  /// Reads the header of the `size` bytes at `base`; `nil` unless it is a format 18 database
  /// whose length matches its counts.
  init?(base: UnsafeRawPointer, size: Int) {
    // The record layout and the screen's tests were checked on little-endian machines only.
    guard UInt16(littleEndian: 1) == 1 else { return nil }
    guard size >= Self.entrySize, size % Self.entrySize == 0,
      base.loadUnaligned(as: UInt32.self) == Self.fileMagic,
      base.loadUnaligned(fromByteOffset: 4, as: UInt32.self) == Self.formatVersion
    else { return nil }
    let walked = Int(base.loadUnaligned(fromByteOffset: 8, as: UInt32.self))
    let named = Int(base.loadUnaligned(fromByteOffset: 12, as: UInt32.self))
    guard (walked + named + 1) * Self.entrySize == size else { return nil }
    self.base = base
    self.walkedCount = walked
    self.namedCount = named
  }

  /// Record `index` of both sets together (set 0 first, then set 1).
  func entry(_ index: Int) -> MagicEntry {
    MagicEntry(raw: base + (index + 1) * Self.entrySize)
  }

  /// The header record, as bytes.
  var header: UnsafeRawBufferPointer {
    UnsafeRawBufferPointer(start: base, count: Self.entrySize)
  }

  /// The records of set 0 grouped into rules: each range starts with a top-level test and holds
  /// its continuations.
  var walkedRules: [Range<Int>] { rules(in: 0..<walkedCount) }

  /// The records of set 1 grouped into named rules.
  var namedRules: [Range<Int>] { rules(in: walkedCount..<(walkedCount + namedCount)) }

  /// How many records a pass over the database reads before it hands them to its `release`
  /// (about 1 MiB).
  static let releaseStride = 2_800

  /// ``walkedRules``, handing every ``releaseStride`` records read, and the last ones, to
  /// `release`.
  func walkedRules(release: (Range<Int>) -> Void) -> [Range<Int>] {
    rules(in: 0..<walkedCount, release: release)
  }

  private func rules(
    in records: Range<Int>, release: (Range<Int>) -> Void = { _ in }
  ) -> [Range<Int>] {
    var rules: [Range<Int>] = []
    var start = records.lowerBound
    var unreleased = records.lowerBound
    for index in records {
      if index - unreleased >= Self.releaseStride {
        release(unreleased..<index)
        unreleased = index
      }
      if index > start && entry(index).level == 0 {
        rules.append(start..<index)
        start = index
      }
    }
    release(unreleased..<records.upperBound)
    if start < records.upperBound { rules.append(start..<records.upperBound) }
    return rules
  }
}

/// One record of a compiled magic database: a test, at some continuation level, with what it
/// prints. Field offsets are those of `struct magic` in format 18.
struct MagicEntry {
  /// The record's first byte.
  let raw: UnsafeRawPointer

  /// The record as bytes.
  var bytes: UnsafeRawBufferPointer {
    UnsafeRawBufferPointer(start: raw, count: CompiledMagic.entrySize)
  }

  /// 0 for a top-level test, n for a line starting with n `>`.
  var level: Int { Int(raw.loadUnaligned(as: UInt16.self)) }
  /// libmagic's flags (`INDIR`, `OFFADD`, `UNSIGNED`, `BINTEST`…).
  var flags: UInt8 { raw.load(fromByteOffset: 2, as: UInt8.self) }
  /// The relation as a character (`=`, `!`, `<`, `>`, `&`, `^`, `x`).
  var relation: UInt8 { raw.load(fromByteOffset: 4, as: UInt8.self) }
  /// The length of a string value.
  var valueLength: Int { Int(raw.load(fromByteOffset: 5, as: UInt8.self)) }
  /// The test's type (`FILE_BYTE`, `FILE_STRING`… in `file.h`).
  var type: UInt8 { raw.load(fromByteOffset: 6, as: UInt8.self) }
  /// The operator applied to the value read (`&`, `|`, `^`, `+`… and the invert bit).
  var maskOperator: UInt8 { raw.load(fromByteOffset: 9, as: UInt8.self) }
  /// The offset the test reads at (negated when ``Flag/negativeOffset`` is set).
  var offset: Int32 { raw.loadUnaligned(fromByteOffset: 12, as: Int32.self) }
  /// The operand of ``maskOperator`` for numeric tests.
  var mask: UInt64 { raw.loadUnaligned(fromByteOffset: 24, as: UInt64.self) }
  /// How far a `search` looks (its `/N`).
  var range: UInt32 { raw.loadUnaligned(fromByteOffset: 24, as: UInt32.self) }
  /// The string modifiers (`/c`, `/W`, `/b`, `/t`…).
  var stringFlags: UInt32 { raw.loadUnaligned(fromByteOffset: 28, as: UInt32.self) }
  /// A numeric value as libmagic stored it (sign-extended for signed types).
  var number: UInt64 { raw.loadUnaligned(fromByteOffset: 32, as: UInt64.self) }

  /// The value's bytes (a string value is the first ``valueLength`` of them).
  func value(count: Int) -> UnsafeRawBufferPointer {
    UnsafeRawBufferPointer(start: raw + 32, count: min(count, 128))
  }

  /// Whether the line has a description (which libmagic does not print in MIME mode, but which
  /// still ends the walk when it matches).
  var hasDescription: Bool { raw.load(fromByteOffset: 160, as: UInt8.self) != 0 }
  /// Whether the line sets a MIME type (`!:mime`).
  var hasMIMEType: Bool { raw.load(fromByteOffset: 224, as: UInt8.self) != 0 }

  /// A string value up to its first NUL (the name a `name` or `use` line carries).
  var name: [UInt8] {
    Array(value(count: 128).prefix(while: { $0 != 0 }))
  }

  /// libmagic's flag bits (`file.h`).
  enum Flag {
    static let indirect: UInt8 = 0x01
    static let offsetAdd: UInt8 = 0x02
    static let indirectOffsetAdd: UInt8 = 0x04
    static let unsigned: UInt8 = 0x08
    static let binaryTest: UInt8 = 0x20
    static let negativeOffset: UInt8 = 0x80
  }
}

import Glibc

/// One test of the compiled magic database, evaluated by our own code the way libmagic's
/// `mget` and `magiccheck` (softmagic.c, 5.44) evaluate it on a buffer.
///
/// The one promise is soundness: ``mayMatch(_:)`` returns `false` only when libmagic's test
/// fails on the same bytes. Where our reading is only a necessary condition (a string compared
/// with `/W` up to its first blank, a search window taken one position wider), it answers `true`
/// more often than libmagic would, never less. Tests whose evaluation depends on anything but
/// the bytes at a fixed offset (indirect or relative offsets, offsets from the end, regular
/// expressions, DER, 16-bit strings, dates, floats) are not built (`init` returns `nil`); the
/// caller treats them as always matching. Case-folded strings (`/c`, `/C`) are read without
/// trusting the locale: a letter matches either ASCII case or any byte from 0x80 up, and a
/// pattern byte from 0x80 up matches any byte.
struct SoftMagicTest: Sendable {
  private enum Kind: Sendable {
    /// An integer of `width` bytes, through the mask operator, compared with a relation.
    case integer
    /// `pattern` at the offset (a necessary condition when `prefixOnly`).
    case string
    /// `pattern` starting anywhere in the `window` starts from the offset.
    case search
  }

  private enum ByteOrder: Sendable { case little, big, middle }

  private let kind: Kind
  private let offset: Int
  private let relation: UInt8
  // Integers.
  private let width: Int
  private let order: ByteOrder
  private let maskOperator: UInt8
  private let mask: UInt64
  private let invert: Bool
  private let unsigned: Bool
  private let value: UInt64
  // Strings and searches.
  private let pattern: [UInt8]
  /// How many bytes libmagic needs from the offset on (a string's whole value).
  private let needed: Int
  /// How many start positions a search tries (`nil`: up to the end).
  private let window: Int?
  /// Whether `/c` or `/C` folds case.
  private let foldsCase: Bool
  /// The index of the first pattern byte case folding cannot change (a search looks for it).
  private let anchor: Int?

  /// How many bits of uniformly random data the test pins down: 32 for a 4-byte equality, 8 for
  /// a byte, 0 for a relation that random data passes often. Used to decide which rules are
  /// left to libmagic.
  let strength: Double

  /// Whether libmagic spends much on the test even when it fails: a search with modifiers over
  /// more than 64 starts compares position by position (only a plain search uses `memmem`).
  let costsLibmagicMuch: Bool

  /// The byte the test requires at an absolute position, when there is one, so tests can be
  /// looked up by that byte instead of run one by one.
  let key: (position: Int, byte: UInt8)?

  /// The test of `entry` (which must be read at an absolute offset: a top-level line, or a
  /// continuation without relative or indirect offsets); `nil` when we do not evaluate it.
  ///
  /// With `anywhere`, a weaker test for a string or search read at any offset (relative,
  /// indirect or from the end): libmagic's value must lie inside the buffer, so its pattern
  /// occurs somewhere in it. `nil` for other types.
  init?(_ entry: MagicEntry, anywhere: Bool = false) {
    let flags = entry.flags
    if anywhere {
      guard entry.type == 5 || entry.type == 20 else { return nil }
    } else {
      guard
        flags
          & (MagicEntry.Flag.indirect | MagicEntry.Flag.offsetAdd
            | MagicEntry.Flag.indirectOffsetAdd | MagicEntry.Flag.negativeOffset) == 0,
        entry.offset >= 0
      else { return nil }
    }
    offset = anywhere ? 0 : Int(entry.offset)
    relation = entry.relation
    unsigned = flags & MagicEntry.Flag.unsigned != 0
    if let (width, order) = Self.integerLayout(entry.type) {
      guard let strength = Self.integerStrength(entry, width: width) else { return nil }
      kind = .integer
      self.width = width
      self.order = order
      maskOperator = entry.maskOperator & 0x07
      mask = entry.mask
      invert = entry.maskOperator & 0x40 != 0
      value = entry.number
      pattern = []
      needed = width
      window = nil
      foldsCase = false
      anchor = nil
      self.strength = strength
      costsLibmagicMuch = false
      key = Self.integerKey(
        offset: offset, width: width, order: order, entry: entry, strength: strength)
      return
    }
    width = 0
    order = .little
    maskOperator = 0
    mask = 0
    invert = false
    value = 0
    guard entry.relation == UInt8(ascii: "="), entry.valueLength > 0,
      entry.valueLength < 128
    else { return nil }
    let flagsMask = entry.stringFlags
    // `/W` `/w` (blanks), `/c` `/C` (case), `/b` `/t`, offset-start, trim and full word:
    // allowed; anything else: not evaluated.
    let known: UInt32 = 0x01 | 0x02 | 0x04 | 0x08 | 0x10 | 0x20 | 0x40 | 0x2000 | 0x4000
    guard flagsMask & ~known == 0 else { return nil }
    foldsCase = flagsMask & 0x0C != 0
    let folding = foldsCase
    let whole = Array(entry.value(count: entry.valueLength))
    let compactsBlanks = flagsMask & 0x03 != 0
    // With `/W` or `/w` a blank in the pattern matches runs of blanks: compare up to the first
    // one (or the first non-ASCII byte, whose class depends on the locale).
    let prefix =
      compactsBlanks
      ? Array(whole.prefix(while: { $0 < 0x80 && !Self.isBlank($0) })) : whole
    pattern = prefix
    anchor = prefix.firstIndex { !(folding && Self.folds($0)) }
    needed = entry.valueLength
    let folds = foldsCase
    // A folded ASCII letter still pins down 7 bits (counted as 1); a folded high byte, none.
    let pinned = prefix.reduce(0.0) { $0 + (folds && Self.folds($1) ? ($1 >= 0x80 ? 0 : 1) : 8) }
    let exactFirst = prefix.first.flatMap { folds && Self.folds($0) ? nil : $0 }
    switch entry.type {
    case 5 where anywhere:  // FILE_STRING, somewhere in the buffer
      guard !prefix.isEmpty else { return nil }
      kind = .search
      window = nil
      strength = 0
      costsLibmagicMuch = false
      key = nil
    case 5:  // FILE_STRING
      kind = .string
      window = nil
      strength = pinned
      costsLibmagicMuch = false
      let position = offset
      key = exactFirst.map { (position, $0) }
    case 20:  // FILE_SEARCH
      guard !prefix.isEmpty else { return nil }
      kind = .search
      // libmagic tries `range` starts (its memmem path one more); take the wider window.
      let range = Int(entry.range)
      window = range == 0 || anywhere ? nil : range + 1
      strength = pinned - (range == 0 ? 16 : log2(Double(range + 1)))
      costsLibmagicMuch = flagsMask != 0 && (range == 0 || range > 64)
      key = nil
    default:
      return nil
    }
  }

  /// How much ``mayMatch(_:)`` costs, in rank: reading a number, comparing a string, searching
  /// a window, searching the whole buffer.
  var evaluationCost: Int {
    switch kind {
    case .integer: 0
    case .string: 1
    case .search: window == nil ? 3 : 2
    }
  }

  /// Whether libmagic's test may match `bytes`; `false` only when it certainly fails.
  func mayMatch(_ bytes: UnsafeRawBufferPointer) -> Bool {
    let count = bytes.count
    // libmagic's `OFFSET_OOB`: the value must lie inside the buffer, or the test fails (and a
    // `!` test succeeds).
    guard offset <= count, needed <= count - offset else {
      return relation == UInt8(ascii: "!")
    }
    switch kind {
    case .integer:
      return integerMatches(bytes)
    case .string:
      return matches(in: bytes, at: offset)
    case .search:
      let last = count - needed
      let end = window.map { min(offset + $0 - 1, last) } ?? last
      guard offset <= end else { return false }
      // Look for the first pattern byte that compares as it is (`anchor`), then check the
      // whole pattern around it; with none, try every start.
      guard let anchor = anchor else {
        for start in offset...end where matches(in: bytes, at: start) { return true }
        return false
      }
      let byte = pattern[anchor]
      var start = offset
      while start <= end {
        guard
          let found = Self.index(
            of: byte, in: bytes, from: start + anchor, through: end + anchor)
        else { return false }
        if matches(in: bytes, at: found - anchor) { return true }
        start = found - anchor + 1
      }
      return false
    }
  }

  private func integerMatches(_ bytes: UnsafeRawBufferPointer) -> Bool {
    var raw: UInt64 = 0
    switch order {
    case .big:
      for index in 0..<width { raw = raw << 8 | UInt64(bytes[offset + index]) }
    case .little:
      for index in (0..<width).reversed() { raw = raw << 8 | UInt64(bytes[offset + index]) }
    case .middle:
      // libmagic's ME32: bytes 1, 0, 3, 2 from most to least significant.
      for index in [1, 0, 3, 2] { raw = raw << 8 | UInt64(bytes[offset + index]) }
    }
    let widthMask: UInt64 = width == 8 ? .max : (1 << UInt64(8 * width)) - 1
    if mask != 0 {
      switch maskOperator {
      case 0: raw &= mask
      case 1: raw |= mask
      case 2: raw ^= mask
      case 3: raw = raw &+ mask
      case 4: raw = raw &- mask
      case 5: raw = raw &* (mask & widthMask)
      case 6: raw /= mask & widthMask
      default: raw %= mask & widthMask
      }
    }
    if invert { raw = ~raw }
    raw &= widthMask
    var v = raw
    if !unsigned {
      let shift = UInt64(64 - 8 * width)
      v = UInt64(bitPattern: Int64(bitPattern: raw << shift) >> Int64(shift))
    }
    let l = value
    switch relation {
    case UInt8(ascii: "x"): return true
    case UInt8(ascii: "!"): return v != l
    case UInt8(ascii: "="): return v == l
    case UInt8(ascii: ">"):
      return unsigned ? v > l : Int64(bitPattern: v) > Int64(bitPattern: l)
    case UInt8(ascii: "<"):
      return unsigned ? v < l : Int64(bitPattern: v) < Int64(bitPattern: l)
    case UInt8(ascii: "&"): return v & l == l
    case UInt8(ascii: "^"): return v & l != l
    default: return true
    }
  }

  /// Whether `pattern` may match at `position`. With case folding, libmagic compares
  /// `tolower`/`toupper` of the data byte in the current locale: an ASCII letter may then match
  /// its other case and, in some locales, bytes from 0x80 up; so may a pattern byte from 0x80
  /// up. Other bytes compare as they are in every locale.
  private func matches(in bytes: UnsafeRawBufferPointer, at position: Int) -> Bool {
    guard position + pattern.count <= bytes.count else { return false }
    for (index, expected) in pattern.enumerated() {
      let byte = bytes[position + index]
      if byte == expected { continue }
      guard foldsCase && Self.folds(expected) else { return false }
      // A pattern byte from 0x80 up may match an ASCII byte too: in ISO-8859-9, `toupper`
      // turns `i` into 0xDD.
      if byte >= 0x80 || expected >= 0x80 || byte == expected ^ 0x20 { continue }
      return false
    }
    return true
  }

  /// Whether case folding may change what a pattern byte matches: ASCII letters and bytes from
  /// 0x80 up.
  private static func folds(_ byte: UInt8) -> Bool {
    byte >= 0x80 || (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "z"))
  }

  private static func index(
    of byte: UInt8, in bytes: UnsafeRawBufferPointer, from start: Int, through end: Int
  ) -> Int? {
    guard let base = bytes.baseAddress,
      let found = memchr(base + start, Int32(byte), end - start + 1)
    else { return nil }
    return UnsafeRawPointer(found) - base
  }

  private static func isBlank(_ byte: UInt8) -> Bool {
    byte == 0x20 || (0x09...0x0D).contains(byte)
  }

  /// Whether libmagic copies the value a line of `type` reads into its value buffer (`mcopy`
  /// in softmagic.c): integers and plain, Pascal and 16-bit strings do.
  static func copiesValue(_ type: UInt8) -> Bool {
    integerLayout(type) != nil || [5, 13, 18, 19].contains(type)
  }

  /// Width and byte order of libmagic's integer types (native order is little-endian here).
  private static func integerLayout(_ type: UInt8) -> (Int, ByteOrder)? {
    switch type {
    case 1: (1, .little)  // byte
    case 2, 10: (2, .little)  // short, leshort
    case 7: (2, .big)  // beshort
    case 4, 11: (4, .little)  // long, lelong
    case 8: (4, .big)  // belong
    case 23: (4, .middle)  // melong
    case 24, 25: (8, .little)  // quad, lequad
    case 26: (8, .big)  // bequad
    default: nil
    }
  }

  /// The bits an integer test pins down; `nil` for one we do not evaluate.
  private static func integerStrength(_ entry: MagicEntry, width: Int) -> Double? {
    // Only the invert bit may accompany the operator.
    guard entry.maskOperator & ~UInt8(0x47) == 0 else { return nil }
    let bits = 8 * width
    let widthMask: UInt64 = width == 8 ? .max : (1 << UInt64(bits)) - 1
    let mask = entry.mask & widthMask
    let operation = entry.maskOperator & 0x07
    // libmagic stops with an error on a division by zero; leave those to it.
    if entry.mask != 0 && operation >= 6 && mask == 0 { return nil }
    guard entry.relation == UInt8(ascii: "=") else {
      return "x!<>&^".utf8.contains(entry.relation) ? 0 : nil
    }
    guard entry.mask != 0 else { return Double(bits) }
    switch operation {
    case 0: return Double(mask.nonzeroBitCount)  // &: the mask's bits
    case 1: return Double(bits - mask.nonzeroBitCount)  // |: the others
    case 2, 3, 4: return Double(bits)  // ^ + -: one to one
    default: return 0  // * / %: many to one
    }
  }

  /// A byte in memory an equality with no operator, or with an `&` keeping that whole byte,
  /// requires: the first byte the mask keeps whole. The masked value's byte there is the byte
  /// read, so the test fails unless it is the value's byte.
  private static func integerKey(
    offset: Int, width: Int, order: ByteOrder, entry: MagicEntry, strength: Double
  ) -> (Int, UInt8)? {
    guard entry.relation == UInt8(ascii: "="), entry.maskOperator & 0x40 == 0, strength > 0
    else { return nil }
    guard entry.mask == 0 || entry.maskOperator & 0x07 == 0 else { return nil }
    for byte in 0..<width {
      // Where the `byte`th byte in memory lands in the value read.
      let shift: UInt64 =
        switch order {
        case .little: UInt64(8 * byte)
        case .big: UInt64(8 * (width - 1 - byte))
        case .middle: [16, 24, 0, 8][byte]
        }
      if entry.mask == 0 || (entry.mask >> shift) & 0xFF == 0xFF {
        return (offset + byte, UInt8(truncatingIfNeeded: entry.number >> shift))
      }
    }
    return nil
  }
}

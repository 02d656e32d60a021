/// Spares libmagic its walk of the whole soft-magic database on binary data that no strong rule
/// can match.
///
/// libmagic tries its rules in order of strength and stops at the first that matches; on data
/// that matches none (random bytes, unknown formats) it tries every one, about 1.8M instructions
/// per call whatever the length (callgrind, libmagic 5.44). Most rules start with a test that
/// pins down 16 bits or more at a fixed offset (`0 string \x89PNG`, `0 belong 0xcafebabe`).
/// The screen sorts the rules once, at load, by their first test:
///
/// - strong: a test ``SoftMagicTest`` evaluates that pins down at least 16 bits (8 for a search
///   libmagic runs position by position);
/// - weak: one it evaluates that pins down fewer (`0 byte 0xe9`, a two-byte search);
/// - unscreened: one it does not evaluate (regular expressions, DER, indirect offsets…).
///
/// A rule whose first test fails contributes nothing to libmagic's walk: it neither prints nor
/// stops it. So when no strong test can match, libmagic on a database of the weak and
/// unscreened rules alone (copied in their order, with the named rules they `use`) gives the
/// whole database's answer; when no weak rule can act either (its first test fails, or so does
/// a test on the way to each of its lines that could print or stop the walk:
/// ``effectPaths(in:magic:)``), a database of the unscreened rules alone does. One exception is
/// checked: an `indirect` line walks the whole database from another offset, so reaching one in
/// the copied rules needs the whole database.
///
/// When strong rules may match, the same holds with those rules added: the small database with
/// them copied in their places (``tailoredDatabase(strongRules:onResidual:)``) gives
/// the whole database's answer, unless one of them could reach an `indirect` line or read a value
/// another rule left.
struct SoftMagicScreen: Sendable {
  /// Tests that pin down fewer bits than this are weak.
  static let strengthThreshold: Double = 16

  /// Which database gives libmagic's answer.
  enum Verdict: Sendable, Hashable {
    /// Only the whole database answers: text, an `indirect` line that may be reached, or a
    /// strong rule that may match and cannot be copied alone.
    case wholeDatabase
    /// Strong rules may match: the weak and unscreened rules' database (`onResidual`) or the
    /// unscreened rules' one, with those rules added in their places.
    case strongRules(onResidual: Bool)
    /// A weak rule may act: ``SoftMagicScreen/residualDatabase``.
    case residual
    /// Only unscreened rules may match: ``SoftMagicScreen/unscreenedDatabase``.
    case unscreened
  }

  private let tests: [SoftMagicTest]
  /// Whether each test is strong.
  private let strong: [Bool]
  /// For each weak test, its rule's ``effectPaths(in:magic:)`` (empty for strong tests).
  private let effects: [[[SoftMagicTest]]]
  /// Tests without a key byte, run every time.
  private let unkeyed: [Int32]
  /// The positions key bytes are read at, ascending.
  private let positions: [Int]
  /// For position index `p` and byte `b`: `keyed[starts[p * 257 + b]..<starts[p * 257 + b + 1]]`.
  private let starts: [UInt16]
  private let keyed: [Int32]
  /// The tests on the way to each `indirect` line in the copied rules.
  private let hazards: [[SoftMagicTest]]
  /// For each test, its rule and what copying that rule alone needs (``StrongRule``).
  let rules: [StrongRule]
  /// The named rules (set 1), and each one's index by name.
  let namedRules: [StrongRule]
  let namedIndex: [[UInt8]: Int32]
  /// Which records the two small databases hold, in their order.
  let residualLayout: DatabaseLayout
  let unscreenedLayout: DatabaseLayout

  /// The compiled database (format 18) of the weak and unscreened rules and the named rules
  /// they use, until ``takeDatabases()`` hands it over.
  private(set) var residualDatabase: [UInt8]
  /// The compiled database of the unscreened rules and the named rules they use, until
  /// ``takeDatabases()`` hands it over.
  private(set) var unscreenedDatabase: [UInt8]
  /// How many rules are strong, weak and unscreened.
  let ruleCounts: (strong: Int, weak: Int, unscreened: Int)
  /// Buffers shorter than this go to the whole database: a 16-bit string test that runs past
  /// the end of a buffer compares bytes libmagic left from an earlier test.
  let minimumLength: Int

  /// Sorts `magic`'s rules; `nil` when an `indirect` line in the copied rules could be reached on
  /// any data, or a copied 16-bit string test at a relative or indirect offset could read bytes
  /// left by another rule, so the copies could never answer alone.
  ///
  /// The passes over all of set 0 hand the records they have gone past to `release`, in runs of
  /// about 1 MiB, and set 1 is handed over once the named rules are sorted. A mapped database
  /// may then drop those pages (the few records read again later come back from the page
  /// cache), so building the screen does not hold the whole file in memory at once: 8 MiB for
  /// Debian 12's database, which set the server's peak resident set.
  init?(_ magic: CompiledMagic, release: (Range<Int>) -> Void = { _ in }) {
    var tests: [SoftMagicTest] = []
    var strong: [Bool] = []
    var effects: [[[SoftMagicTest]]] = []
    var residualRules: [Range<Int>] = []
    var unscreenedRules: [Range<Int>] = []
    var rules: [StrongRule] = []
    // The named rules first (set 1): the passes over set 0 read which ones each rule uses.
    let named = Self.namedRules(magic)
    let hazardousNames = Self.hazardousNames(named: named, in: magic)
    let namedIndex = Self.namedIndex(named)
    let namedRules = Self.namedFacts(named, index: namedIndex, magic: magic)
    release(magic.walkedCount..<(magic.walkedCount + magic.namedCount))
    var unreleased = 0
    for rule in magic.walkedRules(release: release) {
      if rule.lowerBound - unreleased >= CompiledMagic.releaseStride {
        release(unreleased..<rule.lowerBound)
        unreleased = rule.lowerBound
      }
      // libmagic's pass over binary data runs only the rules compiled as binary tests (its
      // `BINTEST` flag); the others (source code, markup: 394 of Debian 12's 3,548 rules, and
      // most of its costly searches) run in the text pass alone. They can't change the answer
      // for the data screened here, so they are neither tested nor copied.
      guard magic.entry(rule.lowerBound).flags & MagicEntry.Flag.binaryTest != 0 else { continue }
      guard let test = SoftMagicTest(magic.entry(rule.lowerBound)) else {
        residualRules.append(rule)
        unscreenedRules.append(rule)
        continue
      }
      tests.append(test)
      // A test libmagic spends much on counts as strong sooner: asking the whole database now
      // and then costs less than running it on every upload.
      let isStrong =
        test.strength >= Self.strengthThreshold
        || (test.costsLibmagicMuch && test.strength >= Self.strengthThreshold / 2)
      strong.append(isStrong)
      effects.append(isStrong ? [] : Self.effectPaths(in: rule, magic: magic))
      rules.append(
        StrongRule(
          rule, magic: magic, namedIndex: namedIndex,
          hazards: isStrong
            ? Self.hazardPaths(in: rule, hazardousNames: hazardousNames, magic: magic) : []))
      if !isStrong { residualRules.append(rule) }
    }
    release(unreleased..<magic.walkedCount)
    var hazards: [[SoftMagicTest]] = []
    for rule in residualRules {
      hazards += Self.hazardPaths(in: rule, hazardousNames: hazardousNames, magic: magic)
    }
    if hazards.contains(where: \.isEmpty) { return nil }
    let used = Self.closure(of: residualRules, named: named, in: magic)
    var minimumLength = 64
    for range in residualRules + used.map({ named[$0]! }) {
      for index in range {
        let entry = magic.entry(index)
        guard entry.type == 18 || entry.type == 19 else { continue }
        if entry.flags & 0x87 == 0 {
          minimumLength = max(minimumLength, Int(entry.offset) + 2 * entry.valueLength + 2)
        } else if !Self.valueWrittenBefore(index, in: range, magic: magic) {
          // A 16-bit string at a moving offset can run past any length, into the bytes the last
          // test that copied a value left. Unless a line of its own rule did that first, that
          // was another rule (or another upload), which differs between the databases. Debian
          // 12's database has no such line (in its `trace-etl`, a `byte` line runs first); a
          // database with one gets no screen.
          return nil
        }
      }
    }

    var unkeyed: [Int32] = []
    var byPosition: [Int: [(UInt8, Int32)]] = [:]
    for (index, test) in tests.enumerated() {
      if let key = test.key {
        byPosition[key.position, default: []].append((key.byte, Int32(index)))
      } else {
        unkeyed.append(Int32(index))
      }
    }
    let positions = byPosition.keys.sorted()
    var starts: [UInt16] = []
    var keyed: [Int32] = []
    starts.reserveCapacity(positions.count * 257)
    for position in positions {
      let entries = byPosition[position]!.sorted { $0.0 < $1.0 }
      var next = 0
      for byte in 0...256 {
        starts.append(UInt16(truncatingIfNeeded: keyed.count))
        while next < entries.count, Int(entries[next].0) == byte {
          keyed.append(entries[next].1)
          next += 1
        }
      }
    }
    guard keyed.count <= Int(UInt16.max) else { return nil }
    self.tests = tests
    self.strong = strong
    self.effects = effects
    self.unkeyed = unkeyed
    self.positions = positions
    self.starts = starts
    self.keyed = keyed
    self.hazards = hazards
    self.minimumLength = minimumLength
    self.rules = rules
    self.namedRules = namedRules
    self.namedIndex = namedIndex
    let strongCount = strong.filter { $0 }.count
    ruleCounts = (strongCount, tests.count - strongCount, unscreenedRules.count)
    residualLayout = Self.layout(magic, rules: residualRules, named: named)
    unscreenedLayout = Self.layout(magic, rules: unscreenedRules, named: named)
    residualDatabase = Self.database(magic, layout: residualLayout)
    unscreenedDatabase = Self.database(magic, layout: unscreenedLayout)
  }

  /// Hands over the two databases (to be loaded into libmagic) and keeps no copy.
  mutating func takeDatabases() -> (residual: [UInt8], unscreened: [UInt8]) {
    defer {
      residualDatabase = []
      unscreenedDatabase = []
    }
    return (residualDatabase, unscreenedDatabase)
  }

  /// Which database gives libmagic's answer for `bytes`. Call it on binary data only (the walk
  /// of text differs) of at least ``minimumLength`` bytes.
  func verdict(_ bytes: UnsafeRawBufferPointer) -> Verdict {
    var strongRules: [Int32] = []
    return verdict(bytes, strongRules: &strongRules)
  }

  /// ``verdict(_:)``, which also appends to `strongRules` the tests whose rules a
  /// ``Verdict/strongRules(onResidual:)`` verdict adds to the small database.
  func verdict(_ bytes: UnsafeRawBufferPointer, strongRules: inout [Int32]) -> Verdict {
    var weakMayAct = false
    func check(_ index: Int32) {
      let test = Int(index)
      // Once one weak rule may act, the others can change nothing: skip them.
      if weakMayAct && !strong[test] { return }
      guard tests[test].mayMatch(bytes) else { return }
      if strong[test] {
        strongRules.append(index)
      } else {
        weakMayAct = effects[test].contains { path in path.allSatisfy { $0.mayMatch(bytes) } }
      }
    }
    for index in unkeyed { check(index) }
    for (slot, position) in positions.enumerated() {
      // A test needing a byte past the end fails (its relation is `=`).
      guard position < bytes.count else { break }
      let bucket = slot * 257 + Int(bytes[position])
      for index in keyed[Int(starts[bucket])..<Int(starts[bucket + 1])] { check(index) }
    }
    for path in hazards where path.allSatisfy({ $0.mayMatch(bytes) }) { return .wholeDatabase }
    if strongRules.isEmpty { return weakMayAct ? .residual : .unscreened }
    guard canCopyAlone(strongRules, for: bytes) else { return .wholeDatabase }
    return .strongRules(onResidual: weakMayAct)
  }

  // MARK: Building

  /// Whether a line that certainly ran before line `index` of `rule` copied its value into
  /// libmagic's value buffer. Certain to have run (if line `index` runs at all) are its
  /// ancestors and the earlier lines at an ancestor's level or its own under the same parent,
  /// each evaluated in order once its parent matched; lines deeper than that belong to an
  /// earlier branch that may not have run. Numbers and plain, Pascal and 16-bit strings read at
  /// a direct offset copy their value; searches, regular expressions, DER and the structural
  /// lines (`name`, `use`, `indirect`, `default`, `clear`) do not.
  static func valueWrittenBefore(
    _ index: Int, in rule: Range<Int>, magic: CompiledMagic
  ) -> Bool {
    var level = magic.entry(index).level
    var line = index
    while line > rule.lowerBound {
      line -= 1
      let entry = magic.entry(line)
      guard entry.level <= level else { continue }
      level = entry.level
      let direct =
        entry.flags & (MagicEntry.Flag.indirect | MagicEntry.Flag.negativeOffset) == 0
      if direct && SoftMagicTest.copiesValue(entry.type) { return true }
    }
    return false
  }

  /// Named rules (set 1) by name.
  static func namedRules(_ magic: CompiledMagic) -> [[UInt8]: Range<Int>] {
    var named: [[UInt8]: Range<Int>] = [:]
    for rule in magic.namedRules where magic.entry(rule.lowerBound).type == 45 {
      named[magic.entry(rule.lowerBound).name] = rule
    }
    return named
  }

  /// The name a `use` line calls (without the `^` that flips byte order).
  static func usedName(_ entry: MagicEntry) -> [UInt8]? {
    guard entry.type == 46 else { return nil }
    let name = entry.name
    return name.first == UInt8(ascii: "^") ? Array(name.dropFirst()) : name
  }

  /// The names the rules use, directly or through other named rules.
  private static func closure(
    of rules: [Range<Int>], named: [[UInt8]: Range<Int>], in magic: CompiledMagic
  ) -> Set<[UInt8]> {
    var found: Set<[UInt8]> = []
    var pending = rules
    while let rule = pending.popLast() {
      for index in rule {
        if let name = usedName(magic.entry(index)), let target = named[name],
          found.insert(name).inserted
        {
          pending.append(target)
        }
      }
    }
    return found
  }

  /// Named rules that hold an `indirect` line, directly or through the rules they use.
  private static func hazardousNames(
    named: [[UInt8]: Range<Int>], in magic: CompiledMagic
  ) -> Set<[UInt8]> {
    var hazardous: Set<[UInt8]> = []
    var changed = true
    while changed {
      changed = false
      for (name, rule) in named where !hazardous.contains(name) {
        let reaches = rule.contains { index in
          let entry = magic.entry(index)
          return entry.type == 41 || usedName(entry).map { hazardous.contains($0) } == true
        }
        if reaches {
          hazardous.insert(name)
          changed = true
        }
      }
    }
    return hazardous
  }

  /// For each `indirect` line of `rule` (or `use` of a hazardous name), the tests of the lines
  /// it sits under that we can evaluate. Lines after one read from the end of the buffer are not
  /// evaluated (libmagic then reads later absolute offsets from there).
  private static func hazardPaths(
    in rule: Range<Int>, hazardousNames: Set<[UInt8]>, magic: CompiledMagic
  ) -> [[SoftMagicTest]] {
    var paths: [[SoftMagicTest]] = []
    var stack: [SoftMagicTest?] = []
    var offsetsMoved = false
    for index in rule {
      let entry = magic.entry(index)
      if entry.flags & MagicEntry.Flag.negativeOffset != 0 { offsetsMoved = true }
      stack.removeLast(max(0, stack.count - entry.level))
      let isHazard =
        entry.type == 41 || usedName(entry).map { hazardousNames.contains($0) } == true
      if isHazard { paths.append(stack.compactMap { $0 }) }
      stack.append(offsetsMoved ? nil : SoftMagicTest(entry))
    }
    return paths
  }

  /// The records of a database of `rules` (set 0) and the named rules they use (set 1).
  private static func layout(
    _ magic: CompiledMagic, rules: [Range<Int>], named allNamed: [[UInt8]: Range<Int>]
  ) -> DatabaseLayout {
    let named = closure(of: rules, named: allNamed, in: magic).map { allNamed[$0]! }
      .sorted { $0.lowerBound < $1.lowerBound }
    return DatabaseLayout(rules: rules, named: named)
  }

  /// A compiled database: `magic`'s header with new counts, then `layout`'s rules (set 0), then
  /// its named rules (set 1), each record copied as it is and in its order.
  private static func database(_ magic: CompiledMagic, layout: DatabaseLayout) -> [UInt8] {
    var bytes = [UInt8](magic.header)
    bytes.reserveCapacity((1 + layout.walkedCount + layout.namedCount) * CompiledMagic.entrySize)
    withUnsafeBytes(of: UInt32(layout.walkedCount).littleEndian) {
      bytes.replaceSubrange(8..<12, with: $0)
    }
    withUnsafeBytes(of: UInt32(layout.namedCount).littleEndian) {
      bytes.replaceSubrange(12..<16, with: $0)
    }
    for range in layout.rules + layout.named {
      for index in range { bytes += magic.entry(index).bytes }
    }
    return bytes
  }
}

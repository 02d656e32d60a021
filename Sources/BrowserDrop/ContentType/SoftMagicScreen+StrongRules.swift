extension SoftMagicScreen {
  /// What copying one rule into a small database needs: where it is, the named rules it uses,
  /// and what could make its copy behave differently from the original.
  ///
  /// A rule whose first test may match is copied, in its place, into the small database the
  /// screen would pick otherwise. Every rule left out still fails its first test, so, as for
  /// the small databases themselves, libmagic's walk of the copy prints and stops where its walk
  /// of the whole database does. Two things break that: an `indirect` line (it walks the whole
  /// database from another offset: ``hazards``), and a 16-bit string test that reads past the
  /// buffer into the bytes the last copied value left, which another rule wrote
  /// (``minimumLength``, ``readsLeftovers``). Either sends the data to the whole database.
  struct StrongRule: Sendable {
    /// The rule's records (set 0 or set 1 of the whole database).
    private let first: Int32
    private let end: Int32
    var records: Range<Int> { Int(first)..<Int(end) }
    /// The named rules its lines `use` (indices into ``SoftMagicScreen/namedRules``).
    let uses: [Int32]
    /// The shortest buffer in which none of its 16-bit string tests at a fixed offset runs past
    /// the end.
    let minimumLength: Int32
    /// Whether a 16-bit string test at a moving offset may read a value another rule left.
    let readsLeftovers: Bool
    /// The tests on the way to each of its `indirect` lines (and `use` of a named rule that
    /// holds one); an empty path is always reached.
    let hazards: [[SoftMagicTest]]

    /// The facts of `rule`'s own lines (not those of the named rules it uses).
    init(
      _ rule: Range<Int>, magic: CompiledMagic, namedIndex: [[UInt8]: Int32],
      hazards: [[SoftMagicTest]]
    ) {
      var uses: [Int32] = []
      var minimumLength = 0
      var readsLeftovers = false
      for index in rule {
        let entry = magic.entry(index)
        if let name = SoftMagicScreen.usedName(entry), let used = namedIndex[name] {
          uses.append(used)
        }
        guard entry.type == 18 || entry.type == 19 else { continue }
        if entry.flags & 0x87 == 0 {
          minimumLength = max(minimumLength, Int(entry.offset) + 2 * entry.valueLength + 2)
        } else if !SoftMagicScreen.valueWrittenBefore(index, in: rule, magic: magic) {
          readsLeftovers = true
        }
      }
      first = Int32(rule.lowerBound)
      end = Int32(rule.upperBound)
      self.uses = uses
      self.minimumLength = Int32(clamping: minimumLength)
      self.readsLeftovers = readsLeftovers
      self.hazards = hazards
    }
  }

  /// The records of a compiled database: its rules (set 0) and named rules (set 1), each a range
  /// of the whole database's records, in the order they are copied.
  struct DatabaseLayout: Sendable {
    let rules: [Range<Int>]
    let named: [Range<Int>]

    /// How many records set 0 holds.
    var walkedCount: Int { rules.reduce(0) { $0 + $1.count } }
    /// How many records set 1 holds.
    var namedCount: Int { named.reduce(0) { $0 + $1.count } }
  }

  /// At most this many strong rules are copied; past that, the whole database answers.
  static let strongRuleLimit = 64

  /// Each named rule's index in ``namedFacts(_:index:magic:)``, by name.
  static func namedIndex(_ named: [[UInt8]: Range<Int>]) -> [[UInt8]: Int32] {
    var index: [[UInt8]: Int32] = [:]
    for (offset, name) in named.keys.sorted(by: { named[$0]!.lowerBound < named[$1]!.lowerBound })
      .enumerated()
    {
      index[name] = Int32(offset)
    }
    return index
  }

  /// The facts of each named rule, in `index`'s order (their `indirect` lines are found where
  /// they are used: ``hazardPaths(in:hazardousNames:magic:)``).
  static func namedFacts(
    _ named: [[UInt8]: Range<Int>], index: [[UInt8]: Int32], magic: CompiledMagic
  ) -> [StrongRule] {
    index.sorted { $0.value < $1.value }.map { name, _ in
      StrongRule(named[name]!, magic: magic, namedIndex: index, hazards: [])
    }
  }

  /// Whether the rules of `tests` (each a strong test that may match) can be copied alone for
  /// `bytes`: no `indirect` line of theirs may be reached, and no 16-bit string test of theirs,
  /// or of the named rules they use, can read a value another rule left.
  func canCopyAlone(_ tests: [Int32], for bytes: UnsafeRawBufferPointer) -> Bool {
    guard tests.count <= Self.strongRuleLimit else { return false }
    var pending: [Int32] = []
    for test in tests {
      let rule = rules[Int(test)]
      guard fits(rule, bytes.count),
        !rule.hazards.contains(where: { path in path.allSatisfy { $0.mayMatch(bytes) } })
      else { return false }
      pending += rule.uses
    }
    var seen: Set<Int32> = []
    while let used = pending.popLast() {
      guard seen.insert(used).inserted else { continue }
      let rule = namedRules[Int(used)]
      guard fits(rule, bytes.count) else { return false }
      pending += rule.uses
    }
    return true
  }

  private func fits(_ rule: StrongRule, _ length: Int) -> Bool {
    !rule.readsLeftovers && length >= Int(rule.minimumLength)
  }

  /// A run of records of a database made for one upload.
  enum Piece: Equatable {
    /// `count` records of the small database, from its record `first` (0: the first after the
    /// header).
    case small(first: Int, count: Int)
    /// `count` records of the whole database, from its record `first`.
    case whole(first: Int, count: Int)
  }

  /// The records of the small database (laid out as ``residualLayout`` when `onResidual`, else
  /// ``unscreenedLayout``) with the rules of `tests` and the named rules they use added in
  /// their places: the runs to copy after a header with the returned counts. Only the added
  /// rules come from the whole database.
  func tailoredDatabase(
    strongRules tests: [Int32], onResidual: Bool
  ) -> (pieces: [Piece], walked: Int, named: Int) {
    let layout = onResidual ? residualLayout : unscreenedLayout
    let added = tests.map { rules[Int($0)].records }.sorted { $0.lowerBound < $1.lowerBound }
    var pending = tests.flatMap { rules[Int($0)].uses }
    var used: Set<Int32> = []
    while let name = pending.popLast() {
      if used.insert(name).inserted { pending += namedRules[Int(name)].uses }
    }
    let present = Set(layout.named.map(\.lowerBound))
    let addedNamed = used.map { namedRules[Int($0)].records }
      .filter { !present.contains($0.lowerBound) }.sorted { $0.lowerBound < $1.lowerBound }

    var pieces: [Piece] = []
    var cursor = 0
    /// Adds `original`'s records in order with `extra` (from the whole database) between them.
    func merge(_ original: [Range<Int>], _ extra: [Range<Int>]) {
      var next = 0
      for range in extra {
        var run = 0
        while next < original.count && original[next].lowerBound < range.lowerBound {
          run += original[next].count
          next += 1
        }
        if run > 0 { pieces.append(.small(first: cursor, count: run)) }
        cursor += run
        pieces.append(.whole(first: range.lowerBound, count: range.count))
      }
      let rest = original[next...].reduce(0) { $0 + $1.count }
      if rest > 0 { pieces.append(.small(first: cursor, count: rest)) }
      cursor += rest
    }
    merge(layout.rules, added)
    merge(layout.named, addedNamed)
    return (
      pieces, layout.walkedCount + added.reduce(0) { $0 + $1.count },
      layout.namedCount + addedNamed.reduce(0) { $0 + $1.count }
    )
  }
}

extension SoftMagicScreen {
  /// For each line of `rule` that can change libmagic's answer, the tests on its way (its own
  /// and its ancestors' that ``SoftMagicTest`` evaluates, but not the rule's first test, which
  /// the caller has seen may match): the rule can print or stop the walk only when every test
  /// on one of these paths may match. Each path lists its cheapest tests first.
  ///
  /// libmagic runs a continuation only when the line before it at the level above matched, and
  /// a line that matches without a description or MIME type (`match` in softmagic.c, 5.44)
  /// neither prints nor ends the walk: it only lets its continuations run. So a line counts
  /// when it has a description or a MIME type, or when it does more than compare a value (a
  /// regular expression or DER, which may fail with an error; `use`, `indirect`, `default`,
  /// `clear`, or any type we do not read): such a line is taken as always able to act. A string
  /// or search at a relative or indirect offset is read as its pattern anywhere in the buffer;
  /// any other line we cannot evaluate is taken as always matching on the way. As in
  /// ``hazardPaths(in:hazardousNames:magic:)``, lines after one read from the end of the buffer
  /// are not evaluated.
  static func effectPaths(in rule: Range<Int>, magic: CompiledMagic) -> [[SoftMagicTest]] {
    var paths: [[SoftMagicTest]] = []
    var stack: [SoftMagicTest?] = []
    var offsetsMoved = false
    for index in rule {
      let entry = magic.entry(index)
      if entry.flags & MagicEntry.Flag.negativeOffset != 0 { offsetsMoved = true }
      stack.removeLast(max(0, stack.count - entry.level))
      stack.append(
        offsetsMoved ? nil : SoftMagicTest(entry) ?? SoftMagicTest(entry, anywhere: true))
      let comparesOnly = SoftMagicTest.copiesValue(entry.type) || entry.type == 20
      if entry.hasDescription || entry.hasMIMEType || !comparesOnly {
        let path = stack.dropFirst().compactMap { $0 }
        paths.append(path.sorted { $0.evaluationCost < $1.evaluationCost })
      }
    }
    return paths
  }
}

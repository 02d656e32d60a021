import BrowserDrop

/// The text keys of the bundled page, which `--strings` may replace: those of `DEFAULT_STRINGS`
/// in Page/app.js, which the page embedder reads at build time. The page ignores any other key,
/// so one in the file is a typo.
enum PageStrings {
  /// Every key, in the page's order.
  static let keys = BundledPageStrings.keys

  /// The keys for `--help`, comma-separated, one entry a line of the help's right-hand column.
  static var helpLines: [String] {
    var lines: [String] = []
    var line = ""
    for (index, key) in keys.enumerated() {
      let item = key + (index == keys.count - 1 ? "." : ",")
      if !line.isEmpty, line.count + 1 + item.count > 62 {
        lines.append(line)
        line = item
      } else {
        line += line.isEmpty ? item : " " + item
      }
    }
    lines.append(line)
    return lines
  }
}

/// The text keys of the bundled page, which `--strings` may replace (Page/app.js,
/// `DEFAULT_STRINGS`). The page ignores any other key, so one in the file is a typo.
enum PageStrings {
  /// Every key, in the page's order.
  static let keys = [
    "title", "subtitle", "dropTitle", "dropHint", "chooseFiles", "chooseFolder", "summaryEmpty",
    "summary", "queued", "uploading", "uploaded", "failed", "waitingForDevice",
    "deviceUnreachable", "notEnoughSpace", "tooLarge", "unsupported", "pathConflict", "skipped",
    "retry", "doneHint", "loadError",
  ]

  /// The keys for `--help`, comma-separated and wrapped to the help's right-hand column.
  static var helpLines: String {
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
    return lines.joined(separator: "\n" + String(repeating: " ", count: 26))
  }
}

import BrowserDrop

/// Byte counts as people write them (`500K`, `20M`, `8G`, `1T`, binary units) and as the command
/// shows them (`12.3 MiB`).
enum ByteSize {
  /// Parses a whole number of bytes with an optional binary suffix: `K`, `M`, `G`, `T`, each
  /// optionally followed by `B` or `iB` (`20M`, `20MB` and `20MiB` are all 20 × 1024² bytes).
  /// Returns `nil` for anything else, for negative values and for values that overflow.
  static func parse(_ text: String) -> Int? {
    let trimmed = text.trimmingWhitespace()
    let digits = trimmed.prefix { $0.isASCII && $0.isNumber }
    guard !digits.isEmpty, let value = Int(digits) else { return nil }
    var suffix = trimmed.dropFirst(digits.count).uppercased()
    if suffix.hasSuffix("IB") {
      suffix.removeLast(2)
      guard suffix.count == 1 else { return nil }
    } else if suffix.hasSuffix("B") {
      suffix.removeLast()
    }
    let shift: Int
    switch suffix {
    case "": shift = 0
    case "K": shift = 10
    case "M": shift = 20
    case "G": shift = 30
    case "T": shift = 40
    default: return nil
    }
    let (result, overflow) = value.multipliedReportingOverflow(by: 1 << shift)
    return overflow ? nil : result
  }

  /// `512 B`, `12.3 KiB`, `4.0 MiB`, `1.2 GiB`…
  static func format<Count: BinaryInteger>(_ count: Count) -> String {
    let bytes = Double(count)
    let units = ["KiB", "MiB", "GiB", "TiB", "PiB"]
    guard bytes >= 1024 else { return "\(count) B" }
    var value = bytes / 1024
    var unit = 0
    while value >= 1024, unit < units.count - 1 {
      value /= 1024
      unit += 1
    }
    let rounded = (value * 10).rounded() / 10
    return value >= 100 ? "\(Int(value.rounded())) \(units[unit])" : "\(rounded) \(units[unit])"
  }
}

extension Int {
  /// `self + other`, or `Int.max` when that does not fit: for sums of sizes that a client
  /// announces (a 19-digit `Content-Length`) and that only ever get compared.
  func addingSaturated(_ other: Int) -> Int {
    let (sum, overflow) = addingReportingOverflow(other)
    return overflow ? .max : sum
  }
}

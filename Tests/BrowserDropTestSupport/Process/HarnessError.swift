/// Errors of the test harness, with what was seen so far.
package struct HarnessError: Error, CustomStringConvertible {
  /// What went wrong, for the test's failure message.
  package let description: String

  /// An error saying `description`.
  package init(description: String) {
    self.description = description
  }
}

// What Foundation's NSString added to String and FoundationEssentials lacks.
extension StringProtocol {
  /// The text in Unicode Normalization Form C, as Foundation's
  /// `precomposedStringWithCanonicalMapping` (the standard library's own normalization data).
  package var nfcNormalized: String {
    String(decoding: String(self)._nfcCodeUnits, as: UTF8.self)
  }

  /// The text without the leading and trailing Unicode scalars that `isTrimmed` accepts, as
  /// Foundation's `trimmingCharacters(in:)` (which FoundationEssentials lacks) with that set.
  package func trimming(_ isTrimmed: (Unicode.Scalar) -> Bool) -> String {
    let scalars = String(self).unicodeScalars
    guard let first = scalars.firstIndex(where: { !isTrimmed($0) }),
      let last = scalars.lastIndex(where: { !isTrimmed($0) })
    else { return "" }
    return String(scalars[first...last])
  }

  /// Without leading and trailing `CharacterSet.whitespaces` as Foundation on Linux has it: tab,
  /// the space separators and U+200B.
  package func trimmingWhitespace() -> String {
    trimming(\.isFoundationWhitespace)
  }

  /// Without leading and trailing `CharacterSet.whitespacesAndNewlines` as Foundation on Linux
  /// has it: those of `trimmingWhitespace()`, U+000A to U+000D, U+0085, U+2028 and U+2029.
  package func trimmingWhitespaceAndNewlines() -> String {
    trimming { scalar in
      switch scalar.value {
      case 0x0A...0x0D, 0x85, 0x2028, 0x2029: true
      default: scalar.isFoundationWhitespace
      }
    }
  }
}

extension Unicode.Scalar {
  /// In Foundation's `CharacterSet.whitespaces` (its own table, which still counts U+200B).
  fileprivate var isFoundationWhitespace: Bool {
    switch value {
    case 0x09, 0x20, 0xA0, 0x1680, 0x2000...0x200B, 0x202F, 0x205F, 0x3000: true
    default: false
    }
  }
}

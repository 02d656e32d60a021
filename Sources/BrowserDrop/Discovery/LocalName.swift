/// A name for the machine on the local network, published as `LABEL.local` through Avahi
/// (`Configuration.localName`).
///
/// One DNS label: letters, digits and hyphens, 1 to 63 bytes, no hyphen at either end. It is
/// kept in lower case, as mDNS compares names without case.
public struct LocalName: Sendable, Hashable, CustomStringConvertible {
  /// The label, for example `intake`.
  public let label: String

  /// The name people type: `intake.local`.
  public var hostName: String { label + ".local" }

  /// The host name, `intake.local`.
  public var description: String { hostName }

  /// Checks `text` (`intake`, `Intake`, `intake.local` or `intake.local.`) and keeps its label
  /// in lower case. Throws ``Invalid`` for anything that is not one DNS label.
  public init(_ text: String) throws(Invalid) {
    var label = text.lowercased()
    if label.hasSuffix(".local.") { label.removeLast(7) }
    if label.hasSuffix(".local") { label.removeLast(6) }
    guard Self.isLabel(label) else { throw Invalid(text: text) }
    self.label = label
  }

  /// A name Avahi chose (its alternative after a conflict, `intake-2`), taken as it is.
  init(avahiLabel label: String) {
    self.label = label
  }

  /// Whether `label` is one DNS label of letters, digits and hyphens.
  static func isLabel(_ label: String) -> Bool {
    (1...63).contains(label.utf8.count)
      && label.utf8.allSatisfy { byte in
        (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte) || byte == UInt8(ascii: "-")
      } && !label.hasPrefix("-") && !label.hasSuffix("-")
  }

  /// A text that is not one DNS label.
  public struct Invalid: Error, Sendable, Hashable, CustomStringConvertible {
    /// The text as given.
    public let text: String

    /// A sentence naming the text and the rule.
    public var description: String {
      "\"\(text)\" is not a local name: use one word of letters, digits and hyphens (up to 63),"
        + " such as intake, published as intake.local."
    }
  }
}

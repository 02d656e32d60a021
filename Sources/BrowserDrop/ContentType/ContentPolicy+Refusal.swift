/// Why an upload's content was refused: answered as 400 `unsupported_type` with ``message``.
struct ContentRefusal: Error, Sendable, Hashable {
  /// A sentence for the person uploading, naming what the file is (for example
  /// "This file is an ELF executable for x86-64, not a .mp3 file.").
  var message: String
}

extension ContentPolicy {
  /// Whether uploads are sniffed at all under this policy.
  var sniffsContent: Bool {
    if case .off = self { false } else { true }
  }

  /// Decides whether sniffed content may be stored under a name; `nil` accepts.
  ///
  /// - `.off` accepts everything (the server does not sniff).
  /// - `.rejectDisguised` refuses only a positively identified executable or script
  ///   (``SniffResult/executable``) whose extension claims media, a document or text
  ///   (``FileExtensionClass``). Executables named `.exe`, `.sh`, `.bin`, `.zip` or with no
  ///   extension are honest and accepted; so is content nobody could identify.
  /// - `.strict(allowedTypes:)` applies the same rule, then accepts only MIME types matching one
  ///   of the patterns (``ContentPolicy/matches(_:pattern:)``). Unknown and empty content is
  ///   refused unless a pattern admits `application/octet-stream` or `application/x-empty`.
  ///
  /// - Parameter fileName: the file's name or relative path; its extension is what is checked.
  func refusal(for sniffed: SniffResult, fileName: String) -> ContentRefusal? {
    refusal(for: sniffed, fileExtension: Self.fileExtension(of: fileName))
  }

  /// Decides whether sniffed content may be stored with an extension (with or without its dot,
  /// empty for none); `nil` accepts.
  func refusal(for sniffed: SniffResult, fileExtension: String) -> ContentRefusal? {
    let fileExtension = Self.normalise(fileExtension)
    switch self {
    case .off:
      return nil
    case .rejectDisguised:
      return disguise(sniffed, fileExtension: fileExtension)
    case .strict(let allowedTypes):
      if let refusal = disguise(sniffed, fileExtension: fileExtension) { return refusal }
      if allowedTypes.contains(where: { Self.matches(sniffed.mimeType, pattern: $0) }) {
        return nil
      }
      let what = sniffed.mimeType == SniffResult.emptyType ? "empty" : sniffed.mimeType
      let accepted = allowedTypes.isEmpty ? "no types" : allowedTypes.joined(separator: ", ")
      return ContentRefusal(
        message: "This file is \(what), and this session accepts only \(accepted).")
    }
  }

  /// Whether a MIME type matches a pattern, case-insensitively: `*/*` (or `*`) matches all,
  /// `audio/*` every `audio/…` type, anything else only itself. Parameters (`; charset=…`) and
  /// blanks are ignored on both sides.
  static func matches(_ mimeType: String, pattern: String) -> Bool {
    let type = bareType(mimeType)
    let pattern = bareType(pattern)
    if pattern == "*/*" || pattern == "*" { return true }
    if pattern.hasSuffix("/*") { return type.hasPrefix(pattern.dropLast()) }
    return type == pattern
  }

  private func disguise(_ sniffed: SniffResult, fileExtension: String) -> ContentRefusal? {
    guard let executable = sniffed.executable, FileExtensionClass(fileExtension) != nil else {
      return nil
    }
    let article = "aeiou".contains(executable.lowercased().first ?? " ") ? "an" : "a"
    return ContentRefusal(
      message: "This file is \(article) \(executable), not a .\(fileExtension) file.")
  }

  private static func bareType(_ text: String) -> String {
    let bare = text.prefix(while: { $0 != ";" })
    return bare.filter { !$0.isWhitespace }.lowercased()
  }

  /// The extension of the last path segment, lowercased and without its dot; empty for none
  /// (`notes`, `.profile`, `archive.`).
  static func fileExtension(of fileName: String) -> String {
    let name = fileName.split(separator: "/").last.map(String.init) ?? fileName
    guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return "" }
    return String(name[name.index(after: dot)...]).lowercased()
  }

  private static func normalise(_ fileExtension: String) -> String {
    (fileExtension.hasPrefix(".") ? String(fileExtension.dropFirst()) : fileExtension)
      .lowercased()
  }
}

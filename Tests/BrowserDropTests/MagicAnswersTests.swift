import Testing

@testable import BrowserDrop

/// ``MagicAnswers``: an answer found again by its bytes is the one parsing gives, and types are
/// shared copies.
struct MagicAnswersTests {
  /// What libmagic may print in MIME mode, with the type and charset each must give.
  static let cases: [(String, String, String?)] = [
    ("application/octet-stream; charset=binary", "application/octet-stream", nil),
    ("text/plain; charset=us-ascii", "text/plain", "us-ascii"),
    ("text/plain; charset=utf-8", "text/plain", "utf-8"),
    ("Image/PNG; charset=binary", "image/png", nil),
    ("image/png", "image/png", nil),
    ("application/x-empty; charset=binary", "application/x-empty", nil),
    ("inode/x-empty", "application/x-empty", nil),
    ("data", "application/octet-stream", nil),
    ("application/x-executable; charset=binary", "application/x-executable", nil),
    (" text/html ;  charset=ISO-8859-1 ", "text/html", "iso-8859-1"),
    ("text/plain; charset=", "text/plain", nil),
  ]

  private static func answer(_ answers: MagicAnswers, _ text: String) -> MagicAnswers.Answer {
    text.withCString { answers.answer($0) }
  }

  @Test func foundAnswersAreParsedAnswers() {
    let answers = MagicAnswers(capacity: 4)
    // Twice each: the first parses (and, below capacity, remembers), the second finds.
    for _ in 0..<2 {
      for (text, type, charset) in Self.cases {
        let found = Self.answer(answers, text)
        let parsed = answers.answer(parsing: text)
        #expect(found.mimeType == type && parsed.mimeType == type, "\(text)")
        #expect(found.charset == charset && parsed.charset == charset, "\(text)")
        #expect(found.kind == ContentKind(mimeType: type) && parsed.kind == found.kind)
        #expect(found.namesExecutable == (type == "application/x-executable"), "\(text)")
      }
    }
    #expect(answers.unknown.mimeType == SniffResult.unknownType && answers.unknown.charset == nil)
  }

  /// Answers with one type and different charsets hold one copy of the type.
  @Test func typesAreSharedCopies() {
    func address(_ string: String) -> UnsafeRawPointer? {
      string.utf8.withContiguousStorageIfAvailable { UnsafeRawPointer($0.baseAddress) } ?? nil
    }
    let answers = MagicAnswers(capacity: 16)
    let ascii = Self.answer(answers, "application/x-something-long; charset=us-ascii")
    let utf8 = Self.answer(answers, "application/x-something-long; charset=utf-8")
    #expect(ascii.mimeType == utf8.mimeType)
    #expect(address(ascii.mimeType) != nil && address(ascii.mimeType) == address(utf8.mimeType))
  }
}

import Foundation
import Testing

@testable import BrowserDrop

/// The library uses FoundationEssentials only; its stand-ins for what Foundation added to
/// String and Error must give Foundation's results.
@Suite("Stand-ins for Foundation: the same results")
struct FoundationParityTests {
  static let pieces = [
    " ", "\t", "\u{A0}", "\u{3000}", "\u{200B}", "\n", "\r", "\r\n", "\u{85}", "\u{2028}",
    "\u{B}", "\u{FEFF}", "\u{180E}", "x", "é", "e\u{301}", "\u{301}",
  ]

  @Test func trimmingMatchesTrimmingCharacters() {
    for a in Self.pieces {
      for b in Self.pieces {
        for text in [a + b + "mid" + b + a, a + b, a + "x" + b] {
          #expect(text.trimmingWhitespace() == text.trimmingCharacters(in: .whitespaces))
          #expect(
            text.trimmingWhitespaceAndNewlines()
              == text.trimmingCharacters(in: .whitespacesAndNewlines))
          #expect(
            text.trimming { $0 == " " || $0 == "\t" || $0 == "\r" }
              == text.trimmingCharacters(in: [" ", "\t", "\r"]))
        }
      }
    }
  }

  @Test func nfcMatchesPrecomposedStringInTheBasicPlane() async {
    // Foundation on Linux mangles a supplementary-plane scalar followed by a combining mark
    // (U+10041 U+0301 becomes Á); the standard library does not, so only the BMP is compared.
    // About 190,000 comparisons (a quarter of a second alone, more in the loaded parallel
    // run), kept off the cooperative pool's two threads, which every other test needs.
    let differing = await offTheCooperativePool { () -> [String] in
      var differing: [String] = []
      for value in 0...0xFFFF {
        guard let scalar = Unicode.Scalar(value) else { continue }
        for text in [String(scalar), "e" + String(scalar), String(scalar) + "\u{301}\u{323}"]
        where text.nfcNormalized != text.precomposedStringWithCanonicalMapping {
          differing.append(
            text.unicodeScalars.map { String($0.value, radix: 16) }.joined(separator: " "))
        }
      }
      return differing
    }
    #expect(differing.isEmpty, "\(differing.prefix(10))")
  }

  @Test func errorTextMatchesLocalizedDescription() throws {
    enum Local: Error { case first, second(Int) }
    var errors: [any Error] = [
      POSIXError(.ENOSPC), POSIXError(.EACCES), Local.second(1),
      BrowserDropError.stagingUnavailable(path: "/x", reason: "y"),
    ]
    errors += [4, 255, 256, 257, 260, 512, 513, 514, 516, 640, 642, 3840, 4864].map {
      CocoaError(CocoaError.Code(rawValue: $0), userInfo: [NSFilePathErrorKey: "/x"])
    }
    let scratch = FileManager.default.temporaryDirectory.appending(path: UUID().uuidString)
    defer { try? FileManager.default.removeItem(at: scratch) }
    try Data().write(to: scratch)
    for path in [scratch.path, scratch.path + "/below", "/nonexistent/x/y"] {
      do {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
      } catch { errors.append(error) }
    }
    for error in errors {
      #expect(error.operationFailureText == error.localizedDescription)
    }
  }
}

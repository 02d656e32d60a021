/// Reads the keys of the page's strings table, `const DEFAULT_STRINGS = { key: value, … };` in
/// app.js, with enough of JavaScript's syntax that a value may span lines, hold any quote,
/// brace or comma in its string, or be followed by a comment, and a key may be quoted.
enum StringsTable {
  /// Why the table could not be read.
  struct Failure: Error {
    /// What is wrong, for the build's log.
    let message: String
  }

  /// The table's keys, in order. Throws when the table is missing, empty, holds a key twice, or
  /// is not an object literal of `key: value` entries.
  static func keys(in script: String) throws(Failure) -> [String] {
    guard let start = script.firstMatch(of: /\bDEFAULT_STRINGS\s*=\s*\{/) else {
      throw Failure(message: "no `DEFAULT_STRINGS = {` table found")
    }
    var reader = Reader(text: Array(script[start.range.upperBound...].unicodeScalars))
    var keys: [String] = []
    while true {
      reader.skipSpaceAndComments()
      guard let next = reader.peek else { throw Failure(message: "DEFAULT_STRINGS is not closed") }
      if next == "}" { break }
      let key: String
      if next == "'" || next == "\"" {
        key = try reader.stringLiteral()
      } else {
        key = reader.identifier()
        guard !key.isEmpty else {
          throw Failure(message: "DEFAULT_STRINGS: expected a key, found '\(Character(next))'")
        }
      }
      reader.skipSpaceAndComments()
      guard reader.peek == ":" else {
        throw Failure(message: "DEFAULT_STRINGS: the key \(key) has no ':' and value")
      }
      reader.advance()
      guard !keys.contains(key) else {
        throw Failure(message: "DEFAULT_STRINGS: the key \(key) is there twice")
      }
      keys.append(key)
      // A trailing comma ends the entry; the closing brace ends the table.
      if try reader.skipValue() == "}" { break }
    }
    guard !keys.isEmpty else { throw Failure(message: "DEFAULT_STRINGS is empty") }
    return keys
  }

  /// A cursor over the script after the table's opening brace.
  private struct Reader {
    let text: [Unicode.Scalar]
    var index = 0

    var peek: Unicode.Scalar? { index < text.count ? text[index] : nil }

    mutating func advance() { index += 1 }

    mutating func skipSpaceAndComments() {
      while let scalar = peek {
        if scalar.properties.isWhitespace {
          advance()
        } else if scalar == "/", index + 1 < text.count, text[index + 1] == "/" {
          while let next = peek, next != "\n" { advance() }
        } else if scalar == "/", index + 1 < text.count, text[index + 1] == "*" {
          index += 2
          while index < text.count, !(text[index] == "*" && peek(at: index + 1) == "/") {
            advance()
          }
          index += 2
        } else {
          return
        }
      }
    }

    private func peek(at position: Int) -> Unicode.Scalar? {
      position < text.count ? text[position] : nil
    }

    /// A JavaScript identifier made of ASCII letters, digits, `_` and `$`.
    mutating func identifier() -> String {
      var name = ""
      while let scalar = peek,
        scalar.isASCII,
        scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || scalar == "_"
          || scalar == "$"
      {
        name.unicodeScalars.append(scalar)
        advance()
      }
      return name
    }

    /// A quoted string, `'…'` or `"…"` (or a template), with the character after each `\` kept
    /// as it is: enough for a key, and for finding where a value ends.
    mutating func stringLiteral() throws(Failure) -> String {
      guard let quote = peek else { throw Failure(message: "DEFAULT_STRINGS is not closed") }
      advance()
      var value = ""
      while let scalar = peek {
        advance()
        if scalar == quote { return value }
        if scalar == "\\", let escaped = peek {
          advance()
          value.unicodeScalars.append(escaped)
        } else {
          value.unicodeScalars.append(scalar)
        }
      }
      throw Failure(message: "DEFAULT_STRINGS: a string is not closed")
    }

    /// Skips an entry's value up to the `,` or `}` that ends it, outside any string, template,
    /// comment or bracket, and returns that character (consumed).
    mutating func skipValue() throws(Failure) -> Unicode.Scalar {
      var depth = 0
      while true {
        skipSpaceAndComments()
        guard let scalar = peek else { throw Failure(message: "DEFAULT_STRINGS is not closed") }
        switch scalar {
        case "'", "\"", "`":
          _ = try stringLiteral()
        case "(", "[", "{":
          depth += 1
          advance()
        case ")", "]":
          depth -= 1
          advance()
        case ",", "}":
          advance()
          if depth == 0 { return scalar }
          if scalar == "}" { depth -= 1 }
        default:
          advance()
        }
      }
    }
  }
}

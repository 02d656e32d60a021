/// A JSON value with object keys kept in the order written, serialised on one line.
enum JSONValue: Sendable {
  case string(String)
  case int(Int64)
  case bool(Bool)
  case null
  case array([JSONValue])
  case object([(String, JSONValue)])

  /// An integer value of any width.
  static func number<Integer: BinaryInteger>(_ value: Integer) -> JSONValue {
    .int(Int64(value))
  }

  /// A string, or `null` for `nil`.
  static func optional(_ value: String?) -> JSONValue {
    value.map(JSONValue.string) ?? .null
  }

  /// The value as compact JSON text. Control characters, bidirectional overrides and line
  /// separators in strings are written as `\u` escapes.
  var serialized: String {
    var output = ""
    write(to: &output)
    return output
  }

  private func write(to output: inout String) {
    switch self {
    case .string(let text): Self.writeString(text, to: &output)
    case .int(let value): output += String(value)
    case .bool(let value): output += value ? "true" : "false"
    case .null: output += "null"
    case .array(let items):
      output += "["
      for (index, item) in items.enumerated() {
        if index > 0 { output += "," }
        item.write(to: &output)
      }
      output += "]"
    case .object(let members):
      output += "{"
      for (index, (key, value)) in members.enumerated() {
        if index > 0 { output += "," }
        Self.writeString(key, to: &output)
        output += ":"
        value.write(to: &output)
      }
      output += "}"
    }
  }

  private static func writeString(_ text: String, to output: inout String) {
    output += "\""
    // Most names are printable ASCII with nothing to escape: copy them whole.
    let plain = text.utf8.allSatisfy { byte in
      byte >= 0x20 && byte < 0x7F && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\")
    }
    if plain {
      output += text
      output += "\""
      return
    }
    for scalar in text.unicodeScalars {
      switch scalar {
      case "\"": output += "\\\""
      case "\\": output += "\\\\"
      case "\n": output += "\\n"
      case "\r": output += "\\r"
      case "\t": output += "\\t"
      default:
        if TerminalText.isUnsafe(scalar) {
          let hex = String(scalar.value, radix: 16, uppercase: false)
          output += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        } else {
          output.unicodeScalars.append(scalar)
        }
      }
    }
    output += "\""
  }
}

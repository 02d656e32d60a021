/// A parsed HTTP/1.x request head: request line and the headers the server uses.
struct RequestHead: Sendable, Equatable {
  /// The longest head accepted, in bytes (protocol v1: 431 beyond).
  static let maximumSize = 16 * 1024

  var method: String
  var target: String
  var host: String?
  var origin: String?
  var contentLength: Int?
  var hasTransferEncoding = false
  var expectsContinue = false
  /// `Upload-Offset` (the resumable extension's PATCH): digits only, at most one.
  var uploadOffset: Int?

  /// Where the head ends in `bytes` (the index after the blank line), or `nil` when it has not
  /// arrived yet. A bare-LF blank line ends it too, so that such a head is refused at once.
  /// `scanFrom` lets a caller continue a search as bytes arrive.
  static func end(in bytes: UnsafeRawBufferPointer, scanFrom start: Int) -> Int? {
    var index = max(start, 0)
    while index < bytes.count {
      if bytes[index] == 0x0A {
        if index + 1 < bytes.count, bytes[index + 1] == 0x0A { return index + 2 }
        if index + 2 < bytes.count, bytes[index + 1] == 0x0D, bytes[index + 2] == 0x0A {
          return index + 3
        }
      }
      index += 1
    }
    return nil
  }

  /// Parses a complete head (through its blank line). Throws `bad_request` for anything that
  /// is not strict HTTP/1.x: bare LF, obs-fold, control characters, duplicate or malformed
  /// framing headers.
  static func parse(_ bytes: UnsafeRawBufferPointer) throws(Refusal) -> RequestHead {
    var lines: [Range<Int>] = []
    var lineStart = 0
    var index = 0
    while index < bytes.count {
      let byte = bytes[index]
      if byte == 0x0A {
        guard index > lineStart, bytes[index - 1] == 0x0D else {
          throw Refusal(.badRequest, "Header lines must end with CRLF.")
        }
        lines.append(lineStart..<(index - 1))
        lineStart = index + 1
      } else if byte == 0x0D, index + 1 < bytes.count, bytes[index + 1] != 0x0A {
        throw Refusal(.badRequest, "A bare CR is not allowed in a request head.")
      }
      index += 1
    }
    guard lines.count >= 2, lines.last!.isEmpty else { throw Refusal(.badRequest) }

    var head = try parseRequestLine(bytes, lines[0])
    var hostCount = 0
    var originCount = 0
    var lengthCount = 0
    var offsetCount = 0
    for line in lines.dropFirst().dropLast() {
      guard !line.isEmpty else { throw Refusal(.badRequest) }
      let first = bytes[line.lowerBound]
      if first == 0x20 || first == 0x09 {
        throw Refusal(.badRequest, "Folded header lines are not accepted.")
      }
      guard let colon = line.first(where: { bytes[$0] == 0x3A }), colon > line.lowerBound else {
        throw Refusal(.badRequest, "A header line has no name.")
      }
      for position in line.lowerBound..<colon where !isTokenByte(bytes[position]) {
        throw Refusal(.badRequest, "A header name has a character that is not allowed.")
      }
      var valueStart = colon + 1
      var valueEnd = line.upperBound
      while valueStart < valueEnd, bytes[valueStart] == 0x20 || bytes[valueStart] == 0x09 {
        valueStart += 1
      }
      while valueEnd > valueStart, bytes[valueEnd - 1] == 0x20 || bytes[valueEnd - 1] == 0x09 {
        valueEnd -= 1
      }
      for position in valueStart..<valueEnd {
        let byte = bytes[position]
        if (byte < 0x20 && byte != 0x09) || byte == 0x7F {
          throw Refusal(.badRequest, "A header value has a control character.")
        }
      }
      // Names and the Expect value are compared in place: a String for each header line cost
      // two allocations per header on every request.
      let name = line.lowerBound..<colon
      if equalsIgnoringCase(bytes, name, "host") {
        hostCount += 1
        head.host = string(bytes, valueStart..<valueEnd)
      } else if equalsIgnoringCase(bytes, name, "origin") {
        originCount += 1
        head.origin = string(bytes, valueStart..<valueEnd)
      } else if equalsIgnoringCase(bytes, name, "content-length") {
        lengthCount += 1
        head.contentLength = try parseLength(bytes, valueStart..<valueEnd)
      } else if equalsIgnoringCase(bytes, name, "upload-offset") {
        offsetCount += 1
        head.uploadOffset = try parseLength(bytes, valueStart..<valueEnd, name: "Upload-Offset")
      } else if equalsIgnoringCase(bytes, name, "transfer-encoding") {
        head.hasTransferEncoding = true
      } else if equalsIgnoringCase(bytes, name, "expect") {
        head.expectsContinue = equalsIgnoringCase(bytes, valueStart..<valueEnd, "100-continue")
      }
    }
    if hostCount > 1 { throw Refusal(.badRequest, "More than one Host header.") }
    if originCount > 1 { throw Refusal(.badRequest, "More than one Origin header.") }
    if lengthCount > 1 { throw Refusal(.badRequest, "More than one Content-Length header.") }
    if offsetCount > 1 { throw Refusal(.badRequest, "More than one Upload-Offset header.") }
    if head.host == nil { throw Refusal(.badRequest, "The Host header is missing.") }
    return head
  }

  /// The Host values of `bytes`, read leniently: only complete lines (ending in bare LF or
  /// CRLF) up to the blank line, the request line skipped, values trimmed of SP and HTAB. A head
  /// the strict parser refuses is read this way so that `RequestPolicy` can decide Host first.
  static func lenientHostValues(in bytes: UnsafeRawBufferPointer) -> [String] {
    var hosts: [String] = []
    var lineStart = 0
    var isRequestLine = true
    for index in bytes.indices where bytes[index] == 0x0A {
      var lineEnd = index
      if lineEnd > lineStart, bytes[lineEnd - 1] == 0x0D { lineEnd -= 1 }
      defer { lineStart = index + 1 }
      if isRequestLine {
        isRequestLine = false
        continue
      }
      if lineEnd == lineStart { break }  // the blank line: the head ends here
      guard lineEnd - lineStart >= 5,
        asciiLowercased(bytes, lineStart..<(lineStart + 5)) == "host:"
      else { continue }
      var valueStart = lineStart + 5
      var valueEnd = lineEnd
      while valueStart < valueEnd, bytes[valueStart] == 0x20 || bytes[valueStart] == 0x09 {
        valueStart += 1
      }
      while valueEnd > valueStart, bytes[valueEnd - 1] == 0x20 || bytes[valueEnd - 1] == 0x09 {
        valueEnd -= 1
      }
      hosts.append(string(bytes, valueStart..<valueEnd))
    }
    return hosts
  }

  private static func parseRequestLine(
    _ bytes: UnsafeRawBufferPointer, _ line: Range<Int>
  )
    throws(Refusal) -> RequestHead
  {
    let spaces = line.filter { bytes[$0] == 0x20 }
    guard spaces.count == 2, spaces[0] > line.lowerBound, spaces[1] > spaces[0] + 1,
      spaces[1] + 1 < line.upperBound
    else {
      throw Refusal(.badRequest, "The request line is malformed.")
    }
    let methodRange = line.lowerBound..<spaces[0]
    let targetRange = (spaces[0] + 1)..<spaces[1]
    let version = string(bytes, (spaces[1] + 1)..<line.upperBound)
    guard version == "HTTP/1.1" || version == "HTTP/1.0" else {
      throw Refusal(.badRequest, "Only HTTP/1.0 and HTTP/1.1 are spoken.")
    }
    for position in methodRange where !isTokenByte(bytes[position]) {
      throw Refusal(.badRequest, "The method is malformed.")
    }
    for position in targetRange where bytes[position] <= 0x20 || bytes[position] >= 0x7F {
      throw Refusal(.badRequest, "The request target has a character that is not allowed.")
    }
    return RequestHead(method: string(bytes, methodRange), target: string(bytes, targetRange))
  }

  private static func parseLength(
    _ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, name: String = "Content-Length"
  )
    throws(Refusal) -> Int
  {
    guard !range.isEmpty else {
      throw Refusal(.badRequest, "\(name) is not a valid number.")
    }
    // Any run of digits is a valid length, however long: one past what an Int holds is weighed
    // as `Int.max` (413 or 507), not refused as unreadable.
    var value = 0
    for position in range {
      let byte = bytes[position]
      guard byte >= 0x30, byte <= 0x39 else {
        throw Refusal(.badRequest, "\(name) is not a valid number.")
      }
      let (times10, overflowA) = value.multipliedReportingOverflow(by: 10)
      let (sum, overflowB) = times10.addingReportingOverflow(Int(byte - 0x30))
      value = overflowA || overflowB ? Int.max : sum
    }
    return value
  }

  private static func isTokenByte(_ byte: UInt8) -> Bool {
    switch byte {
    case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
    case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"),
      UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"),
      UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
      UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
      true
    default: false
    }
  }

  private static func string(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> String {
    String(decoding: UnsafeRawBufferPointer(rebasing: bytes[range]), as: UTF8.self)
  }

  /// Whether `bytes[range]` is `lowercase` (lowercase ASCII) in any case.
  private static func equalsIgnoringCase(
    _ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, _ lowercase: StaticString
  ) -> Bool {
    guard range.count == lowercase.utf8CodeUnitCount else { return false }
    let expected = lowercase.utf8Start
    var offset = 0
    for position in range {
      let byte = bytes[position]
      let folded = byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
      if folded != expected[offset] { return false }
      offset += 1
    }
    return true
  }

  private static func asciiLowercased(
    _ bytes: UnsafeRawBufferPointer, _ range: Range<Int>
  )
    -> String
  {
    String(
      decoding: bytes[range].map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
  }
}

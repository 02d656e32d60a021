import Foundation

/// A reply read off the wire.
package struct HTTPReply: Sendable {
  /// The status code.
  package var status: Int
  /// Header fields, names lowercased.
  package var headers: [String: String]
  /// The body (by Content-Length, or what arrived before the close).
  package var body: [UInt8]

  /// Makes a reply.
  package init(status: Int, headers: [String: String], body: [UInt8]) {
    self.status = status
    self.headers = headers
    self.body = body
  }

  /// The body as UTF-8.
  package var text: String { String(decoding: body, as: UTF8.self) }

  /// The `error` code of a protocol v1 error body.
  package var errorCode: String? { json?["error"] as? String }

  /// The body as a JSON object.
  package var json: [String: Any]? {
    (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
  }

  /// A reply from the start of `bytes`: nil until the head is complete, and with `requireBody`
  /// until the whole body (by Content-Length) is there.
  package static func parse(_ bytes: [UInt8], requireBody: Bool) -> HTTPReply? {
    guard let end = findHeadEnd(bytes) else { return nil }
    let head = String(decoding: bytes[..<end], as: UTF8.self)
    let lines = head.components(separatedBy: "\r\n")
    let statusParts = lines[0].split(separator: " ")
    guard statusParts.count >= 2, let status = Int(statusParts[1]) else { return nil }
    var headers: [String: String] = [:]
    for line in lines.dropFirst() where !line.isEmpty {
      guard let colon = line.firstIndex(of: ":") else { continue }
      headers[line[..<colon].lowercased()] = line[line.index(after: colon)...]
        .trimmingCharacters(in: .whitespaces)
    }
    let bodyStart = end + 4
    let length = Int(headers["content-length"] ?? "0") ?? 0
    if bytes.count - bodyStart < length {
      return requireBody
        ? nil : HTTPReply(status: status, headers: headers, body: Array(bytes[bodyStart...]))
    }
    return HTTPReply(
      status: status, headers: headers, body: Array(bytes[bodyStart..<(bodyStart + length)]))
  }

  private static func findHeadEnd(_ bytes: [UInt8]) -> Int? {
    guard bytes.count >= 4 else { return nil }
    for index in 0...(bytes.count - 4)
    where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13
      && bytes[index + 3] == 10
    {
      return index
    }
    return nil
  }
}

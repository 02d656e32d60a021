/// Serialises responses: one buffer, written at once, then the connection closes.
enum Response {
  private static let reasons: [Int: String] = [
    100: "Continue", 200: "OK", 201: "Created", 204: "No Content", 400: "Bad Request",
    403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 409: "Conflict",
    411: "Length Required", 413: "Content Too Large", 431: "Request Header Fields Too Large",
    500: "Internal Server Error", 507: "Insufficient Storage",
  ]

  /// The interim answer to `Expect: 100-continue`.
  static let continueBytes = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)

  /// A complete response with `Content-Length` and `Connection: close`.
  static func bytes(
    status: Int, contentType: String, body: [UInt8], extraHeaders: [(String, String)] = []
  ) -> [UInt8] {
    var head = "HTTP/1.1 \(status) \(reasons[status] ?? "Status")\r\n"
    head += "Content-Type: \(contentType)\r\n"
    head += "Content-Length: \(body.count)\r\n"
    head += "Connection: close\r\n"
    head += "X-Content-Type-Options: nosniff\r\n"
    head += "Referrer-Policy: no-referrer\r\n"
    for (name, value) in extraHeaders { head += "\(name): \(value)\r\n" }
    head += "\r\n"
    var bytes = Array(head.utf8)
    bytes.reserveCapacity(bytes.count + body.count)
    bytes.append(contentsOf: body)
    return bytes
  }

  /// A JSON body response.
  static func json(status: Int, _ json: String) -> [UInt8] {
    bytes(
      status: status, contentType: "application/json; charset=utf-8", body: Array(json.utf8),
      extraHeaders: [("Cache-Control", "no-store")])
  }

  /// Protocol v1's error body: `{"error": code, "message": text}`.
  /// A refusal of the resumable extension also says where the upload stands
  /// (`Upload-Offset`, `Upload-Length`) when it is known.
  static func refusal(_ refusal: Refusal) -> [UInt8] {
    let body =
      "{\"error\":\(JSONText.quoted(refusal.error.rawValue)),\"message\":\(JSONText.quoted(refusal.message))}"
    guard
      refusal.uploadOffset != nil || refusal.uploadLength != nil || refusal.refusedBefore != nil
    else {
      return json(status: refusal.error.status, body)
    }
    var headers = [("Cache-Control", "no-store")]
    if let offset = refusal.uploadOffset { headers.append(("Upload-Offset", String(offset))) }
    if let length = refusal.uploadLength { headers.append(("Upload-Length", String(length))) }
    if let refused = refusal.refusedBefore { headers.append(("Upload-Refusal", refused.rawValue)) }
    return bytes(
      status: refusal.error.status, contentType: "application/json; charset=utf-8",
      body: Array(body.utf8), extraHeaders: headers)
  }

  /// The answer to `HEAD /upload`: `204` with where the upload stands. `Upload-Offset` counts
  /// only bytes that are on the disk. `Upload-Space: insufficient` when `restFits` is false: a
  /// PATCH of the rest would get `507` now; `Upload-Refusal` names the refusal of the upload's
  /// last request (`RecentRefusals`).
  static func uploadState(
    offset: Int, length: Int, restFits: Bool = true, refused: ProtocolError? = nil
  ) -> [UInt8] {
    Array(
      ("HTTP/1.1 204 No Content\r\nUpload-Offset: \(offset)\r\nUpload-Length: \(length)\r\n"
        + (restFits ? "" : "Upload-Space: insufficient\r\n")
        + (refused.map { "Upload-Refusal: \($0.rawValue)\r\n" } ?? "")
        + "Cache-Control: no-store\r\nConnection: close\r\nX-Content-Type-Options: nosniff\r\n"
        + "Referrer-Policy: no-referrer\r\n\r\n").utf8)
  }

  /// The success answer to an upload: `201 {"path": cleaned}`. Built from two constant halves
  /// around the length (it is sent once per upload); the same bytes as `json(status: 201, …)`.
  static func created(path: String) -> [UInt8] {
    let body = "{\"path\":\(JSONText.quoted(path))}".utf8
    let length = String(body.count).utf8
    var bytes: [UInt8] = []
    bytes.reserveCapacity(createdHead.count + length.count + createdTail.count + body.count)
    bytes += createdHead
    bytes += length
    bytes += createdTail
    bytes += body
    return bytes
  }

  private static let createdHead = Array(
    "HTTP/1.1 201 Created\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ".utf8
  )
  private static let createdTail = Array(
    ("\r\nConnection: close\r\nX-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer"
      + "\r\nCache-Control: no-store\r\n\r\n").utf8)
}

/// Minimal JSON string quoting, for the few bodies built by hand on the hot path.
enum JSONText {
  static func quoted(_ text: String) -> String {
    // Printable ASCII without quotes or backslashes, as most names are, needs no escaping.
    if text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != 0x22 && $0 != 0x5C }) {
      return "\"" + text + "\""
    }
    var out = "\""
    for scalar in text.unicodeScalars {
      switch scalar {
      case "\"": out += "\\\""
      case "\\": out += "\\\\"
      case "\n": out += "\\n"
      case "\r": out += "\\r"
      case "\t": out += "\\t"
      default:
        if scalar.value < 0x20 || scalar.value == 0x2028 || scalar.value == 0x2029 {
          out +=
            "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count)
            + String(scalar.value, radix: 16)
        } else {
          out.unicodeScalars.append(scalar)
        }
      }
    }
    return out + "\""
  }
}

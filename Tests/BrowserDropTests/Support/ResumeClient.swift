import BrowserDropTestSupport
import Foundation
import Glibc
import Testing

@testable import BrowserDrop

/// Requests of the resumable extension over raw sockets, for the resume tests.
struct ResumeClient {
  let port: Int
  let path: String
  let id: String

  /// A fresh random id: 128 bits as 22 characters of URL-safe base64.
  static func randomID() -> String {
    var bytes = [UInt8](repeating: 0, count: 16)
    for index in bytes.indices { bytes[index] = UInt8.random(in: 0...255) }
    return Data(bytes).base64EncodedString()
      .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
      .replacingOccurrences(of: "=", with: "")
  }

  var target: String { "/upload?path=\(Requests.encode(path))&upload=\(id)" }
  var host: String { "127.0.0.1:\(port)" }

  /// `extra` are more header lines (`Expect: 100-continue`).
  func postHead(length: Int, extra: [String] = []) -> String {
    "POST \(target) HTTP/1.1\r\nHost: \(host)\r\nOrigin: http://\(host)\r\n"
      + "Content-Length: \(length)\r\n" + Self.lines(extra) + "\r\n"
  }

  func patchHead(offset: Int, length: Int, path: String? = nil, extra: [String] = []) -> String {
    let target = path.map { "/upload?path=\(Requests.encode($0))&upload=\(id)" } ?? target
    return "PATCH \(target) HTTP/1.1\r\nHost: \(host)\r\nOrigin: http://\(host)\r\n"
      + "Upload-Offset: \(offset)\r\nContent-Length: \(length)\r\n" + Self.lines(extra)
      + "\r\n"
  }

  private static func lines(_ extra: [String]) -> String {
    extra.map { $0 + "\r\n" }.joined()
  }

  /// `HEAD`: the reply (204 with `upload-offset` and `upload-length`, or a refusal).
  func head(path: String? = nil) async throws -> HTTPReply {
    let target = path.map { "/upload?path=\(Requests.encode($0))&upload=\(id)" } ?? target
    let client = try await RawClient.connect(port: port)
    try await client.send("HEAD \(target) HTTP/1.1\r\nHost: \(host)\r\n\r\n")
    return try await client.readReply()
  }

  /// The durable offset `HEAD` reports, `nil` when the upload is unknown.
  func offset() async throws -> Int? {
    let reply = try await head()
    guard reply.status == 204 else { return nil }
    return Int(reply.headers["upload-offset"] ?? "")
  }

  /// Sends `head` and `body`, then reads the reply.
  func exchange(_ head: String, _ body: ArraySlice<UInt8>) async throws -> HTTPReply {
    let client = try await RawClient.connect(port: port)
    try await client.send(head)
    if !body.isEmpty { try? await client.send(Array(body)) }
    return try await client.readReply()
  }
}

extension RawClient {
  /// Closes with a reset (`SO_LINGER` 0): what the kernel still holds of the sent bytes on
  /// either side is dropped, as when a network goes away under a connection.
  func reset() {
    var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
    setsockopt(
      socket.fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
    socket.close()
  }
}

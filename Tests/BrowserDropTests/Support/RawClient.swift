import BrowserDropSystem
import Foundation
import Glibc
import Testing

@testable import BrowserDrop

/// A reply read off the wire.
struct HTTPReply: Sendable {
  var status: Int
  var headers: [String: String]
  var body: [UInt8]

  var text: String { String(decoding: body, as: UTF8.self) }

  /// The `error` code of a protocol v1 error body.
  var errorCode: String? { json?["error"] as? String }

  var json: [String: Any]? {
    (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
  }
}

/// A test client that speaks raw bytes over 127.0.0.1, through the same reactor as the server
/// (so it never blocks the two cooperative threads the server also needs).
struct RawClient {
  static let timeout = Duration.seconds(20)

  let socket: Socket

  /// Connects to 127.0.0.1:`port`.
  static func connect(port: Int) async throws -> RawClient {
    let fd = Glibc.socket(
      AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
    #expect(fd >= 0)
    let socket = Socket(fd: fd)
    var address = SocketAddress.ipv4("127.0.0.1", port: port)!
    let result = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    if result != 0 {
      guard errno == EINPROGRESS else { throw SystemError(call: "connect", code: errno) }
      try await Reactor.shared.wait(for: .writable, on: fd, deadline: .now + timeout)
      var failure: Int32 = 0
      var length = socklen_t(MemoryLayout<Int32>.size)
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &failure, &length)
      if failure != 0 { throw SystemError(call: "connect", code: failure) }
    }
    return RawClient(socket: socket)
  }

  func send(_ bytes: [UInt8]) async throws {
    try await socket.write(bytes, deadline: .now + Self.timeout)
  }

  func send(_ text: String) async throws { try await send(Array(text.utf8)) }

  /// Reads until the peer closes. Returns everything read.
  func readToEnd(limit: Int = 1 << 20) async throws -> [UInt8] {
    var bytes: [UInt8] = []
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
    defer { buffer.deallocate() }
    while bytes.count < limit {
      let count: Int
      do {
        count = try await socket.read(into: buffer, deadline: .now + Self.timeout)
      } catch let error as SystemError where error.code == ECONNRESET {
        break
      }
      if count == 0 { break }
      bytes.append(contentsOf: buffer[..<count])
    }
    return bytes
  }

  /// Reads one interim or final response head and its body (by Content-Length).
  func readReply() async throws -> HTTPReply {
    var bytes: [UInt8] = []
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
    defer { buffer.deallocate() }
    while true {
      if let reply = Self.parse(bytes, requireBody: true) { return reply }
      let count = try await socket.read(into: buffer, deadline: .now + Self.timeout)
      if count == 0 {
        if let reply = Self.parse(bytes, requireBody: false) { return reply }
        throw ClientError.closedWithoutReply(String(decoding: bytes, as: UTF8.self))
      }
      bytes.append(contentsOf: buffer[..<count])
    }
  }

  /// Whether the server closed the connection (or reset it) without sending anything.
  func closedSilently() async throws -> Bool {
    try await readToEnd().isEmpty
  }

  enum ClientError: Error { case closedWithoutReply(String) }

  static func parse(_ bytes: [UInt8], requireBody: Bool) -> HTTPReply? {
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

/// Request builders for the tests.
enum Requests {
  /// `POST /upload?path=` with the usual headers; `encodedPath` goes in as given.
  static func uploadHead(
    port: Int, encodedPath: String, length: Int?, host: String? = nil, origin: String?? = .none,
    extra: [String] = []
  ) -> String {
    let hostValue = host ?? "127.0.0.1:\(port)"
    var lines = ["POST /upload?path=\(encodedPath) HTTP/1.1", "Host: \(hostValue)"]
    switch origin {
    case .none: lines.append("Origin: http://\(hostValue)")
    case .some(.none): break
    case .some(.some(let value)): lines.append("Origin: \(value)")
    }
    if let length { lines.append("Content-Length: \(length)") }
    lines.append(contentsOf: extra)
    return lines.joined(separator: "\r\n") + "\r\n\r\n"
  }

  static func encode(_ path: String) -> String {
    path.split(separator: "/", omittingEmptySubsequences: false).map {
      $0.addingPercentEncoding(
        withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~")))!
    }.joined(separator: "/")
  }
}

import Glibc

/// The test client: raw bytes over 127.0.0.1, sent in whatever pieces a test chooses (a head cut
/// anywhere, a body trickled, `Expect: 100-continue` and its interim reply), and replies read
/// off the wire. The connection is cut with `socket.close()`.
package struct RawClient: Sendable {
  /// How long any one call may wait for the server.
  package static let timeout = Duration.seconds(20)

  /// An end of the conversation without the reply expected.
  package enum ClientError: Error {
    /// The peer closed before a whole reply head arrived; what had arrived.
    case closedWithoutReply(String)
  }

  /// The connection.
  package let socket: ClientSocket

  /// Connects to 127.0.0.1:`port`.
  package static func connect(port: Int) async throws -> RawClient {
    RawClient(socket: try await ClientSocket(port: port, deadline: .now + timeout))
  }

  /// Sends `bytes` (all of them, waiting while the server does not read).
  package func send(_ bytes: some Collection<UInt8>) async throws {
    try await socket.write(bytes, deadline: .now + Self.timeout)
  }

  /// Sends `text` as UTF-8.
  package func send(_ text: String) async throws { try await send(Array(text.utf8)) }

  /// Reads until the peer closes (or resets) or `limit` bytes arrived. Returns everything read.
  package func readToEnd(limit: Int = 1 << 20) async throws -> [UInt8] {
    var bytes: [UInt8] = []
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
    defer { buffer.deallocate() }
    while bytes.count < limit {
      let count: Int
      do {
        count = try await socket.read(into: buffer, deadline: .now + Self.timeout)
      } catch let error as ClientSocket.Failure where error.code == ECONNRESET {
        break
      }
      if count == 0 { break }
      bytes.append(contentsOf: buffer[..<count])
    }
    return bytes
  }

  /// Reads one interim or final response head and its body (by Content-Length).
  package func readReply() async throws -> HTTPReply {
    var bytes: [UInt8] = []
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
    defer { buffer.deallocate() }
    while true {
      if let reply = HTTPReply.parse(bytes, requireBody: true) { return reply }
      let count = try await socket.read(into: buffer, deadline: .now + Self.timeout)
      if count == 0 {
        if let reply = HTTPReply.parse(bytes, requireBody: false) { return reply }
        throw ClientError.closedWithoutReply(String(decoding: bytes, as: UTF8.self))
      }
      bytes.append(contentsOf: buffer[..<count])
    }
  }

  /// Whether the server closed the connection (or reset it) without sending anything.
  package func closedSilently() async throws -> Bool {
    try await readToEnd().isEmpty
  }
}

import BrowserDropSystem
import CBrowserDropLinux
import Glibc

/// `--metrics ADDRESS:PORT`: `GET /metrics` and `GET /healthz` on a listener of their own, never
/// on the upload port, so the upload server's "nothing else" rule stands.
///
/// One thread of its own serves one request at a time with blocking calls and 2-second socket
/// timeouts: a scraper asks every few seconds, and a client that stalls holds only this thread,
/// never the event loop or the cooperative pool. Everything it answers is copied from
/// ``OperationsState`` under its lock; the disk and the destination are probed elsewhere.
final class MetricsServer: Sendable {
  /// The address and port it listens on (the port the kernel picked, for port 0).
  let host: String
  let port: Int
  private let listenFD: Int32

  /// Binds and listens on `host:port` now, so a taken port is a start-up failure.
  init(host: String, port: Int) throws(SystemError) {
    let isV6 = host.contains(":")
    let fd = try Syscall.blocking("socket") {
      socket(
        isV6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    }
    do throws(SystemError) {
      var one: Int32 = 1
      _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
      var storage = sockaddr_storage()
      let length: socklen_t
      if isV6 {
        var address = sockaddr_in6()
        address.sin6_family = sa_family_t(AF_INET6)
        address.sin6_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET6, host, &address.sin6_addr) == 1 else {
          throw SystemError(call: "inet_pton", code: EINVAL)
        }
        withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: address, as: sockaddr_in6.self) }
        length = socklen_t(MemoryLayout<sockaddr_in6>.size)
      } else {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
          throw SystemError(call: "inet_pton", code: EINVAL)
        }
        withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: address, as: sockaddr_in.self) }
        length = socklen_t(MemoryLayout<sockaddr_in>.size)
      }
      try Syscall.blocking("bind") {
        withUnsafePointer(to: &storage) {
          $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
      }
      try Syscall.blocking("listen") { listen(fd, 16) }
      var bound = sockaddr_storage()
      var boundLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
      try Syscall.blocking("getsockname") {
        withUnsafeMutablePointer(to: &bound) {
          $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &boundLength) }
        }
      }
      let boundPort = withUnsafeBytes(of: &bound) { bytes in
        isV6
          ? bytes.load(as: sockaddr_in6.self).sin6_port : bytes.load(as: sockaddr_in.self).sin_port
      }
      self.port = Int(UInt16(bigEndian: boundPort))
    } catch {
      close(fd)
      throw error
    }
    self.host = host
    self.listenFD = fd
  }

  /// The URL of `/metrics`, for the line that tells where it is.
  var url: String {
    host.contains(":") ? "http://[\(host)]:\(port)/metrics" : "http://\(host):\(port)/metrics"
  }

  /// Serves on a thread of its own for the life of the process; `answer` makes the response to
  /// a request for a path.
  func serve(_ answer: @escaping @Sendable (_ path: String) -> Response) throws(SystemError) {
    let fd = listenFD
    try SystemThread.start(name: "bd-metrics") {
      while true {
        guard let client = try? Syscall.blocking("accept4", { cbd_accept(fd) }) else {
          // Out of descriptors or memory for a moment: wait rather than spin.
          Syscall.sleep(.milliseconds(100))
          continue
        }
        // Blocking, with the timeouts `handle` sets: this thread does nothing else meanwhile.
        _ = fcntl(client, F_SETFL, 0)
        Self.handle(FileDescriptor(owning: client), answer)
      }
    }
  }

  /// A response: status line, media type, body.
  struct Response: Sendable {
    var status: String
    var contentType = "text/plain; charset=utf-8"
    var body: String
  }

  private static func handle(
    _ client: consuming FileDescriptor, _ answer: (String) -> Response
  ) {
    var timeout = timeval(tv_sec: 2, tv_usec: 0)
    let size = socklen_t(MemoryLayout<timeval>.size)
    _ = setsockopt(client.rawValue, SOL_SOCKET, SO_RCVTIMEO, &timeout, size)
    _ = setsockopt(client.rawValue, SOL_SOCKET, SO_SNDTIMEO, &timeout, size)
    let response = readHead(client).map { head in respond(to: head, answer) }
    if let response {
      let text =
        "HTTP/1.1 \(response.status)\r\nContent-Type: \(response.contentType)\r\n"
        + "Content-Length: \(response.body.utf8.count)\r\nConnection: close\r\n\r\n"
        + response.body
      let fd = client.rawValue
      Array(text.utf8).withUnsafeBytes { buffer in
        var offset = 0
        while offset < buffer.count {
          let sent = try? Syscall.blocking("send") {
            send(fd, buffer.baseAddress! + offset, buffer.count - offset, Int32(MSG_NOSIGNAL))
          }
          guard let sent, sent > 0 else { return }
          offset += sent
        }
      }
    }
    try? client.close()
  }

  /// The request head, up to 8 KiB; `nil` when the client went quiet or sent more.
  private static func readHead(_ client: borrowing FileDescriptor) -> String? {
    var head: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1024)
    while head.count < 8192 {
      let count = chunk.withUnsafeMutableBytes { buffer in
        (try? Syscall.blocking("recv") {
          recv(client.rawValue, buffer.baseAddress, buffer.count, 0)
        })
          ?? 0
      }
      guard count > 0 else { return nil }
      head += chunk[..<count]
      if let text = String(validating: head, as: UTF8.self), text.contains("\r\n\r\n") {
        return text
      }
    }
    return nil
  }

  /// `GET` (or `HEAD`) of a path; anything else is refused the way the upload server refuses.
  static func respond(to head: String, _ answer: (String) -> Response) -> Response {
    // "\r\n" is one Character: split on newlines, not on "\r".
    let requestLine = (head.split(whereSeparator: \.isNewline).first ?? "").split(separator: " ")
    guard requestLine.count == 3, requestLine[2].hasPrefix("HTTP/1.") else {
      return Response(status: "400 Bad Request", body: "Bad request.\n")
    }
    guard requestLine[0] == "GET" || requestLine[0] == "HEAD" else {
      return Response(status: "405 Method Not Allowed", body: "Only GET.\n")
    }
    let path = String(requestLine[1].prefix { $0 != "?" })
    var response = answer(path)
    if requestLine[0] == "HEAD" { response.body = "" }
    return response
  }
}

import BrowserDropTestSupport
import Foundation
import Glibc
import Testing

/// The command raises its soft limit on open descriptors towards the hard limit
/// (`OpenFileLimit`): started with systemd's usual soft limit, a high `--max-connections` would
/// otherwise leave connections queued, unanswered, once the descriptors run out.
@Suite("The open file limit")
struct OpenFileLimitTests {
  @Test("Started with a soft limit of 64, the command raises it and serves 150 connections at once")
  func connectionsPastTheSoftLimit() async throws {
    let folder = try TemporaryFolder()
    let command = try CommandProcess(
      [
        "--json", "--port", "0", "--bind", "127.0.0.1", "--max-connections", "200",
        "--idle-timeout", "120", "--staging", folder.path("staging").path,
      ],
      launcher: ["/usr/bin/prlimit", "--nofile=64:4096", "--"])
    defer { Task { await command.stop() } }
    let port = try await command.listeningPort()
    let limits = try String(contentsOfFile: "/proc/\(command.pid)/limits", encoding: .utf8)
    let openFiles = limits.split(separator: "\n").first { $0.hasPrefix("Max open files") }
    #expect(
      openFiles?.split(separator: " ").dropFirst(3).prefix(2) == ["4096", "4096"],
      "\(openFiles ?? "")")

    let answers = await Self.statusLines(port: port, connections: 150)
    #expect(answers.count == 150)
    #expect(answers.allSatisfy { $0 == "HTTP/1.1 200 OK" }, "\(Set(answers))")
    command.send(SIGINT)
    #expect(try await command.waitForExit() == 0)
  }

  /// Opens `connections` connections to 127.0.0.1:`port` and sends `GET /config.json` on the
  /// last one only, so the server holds all the others open waiting for their requests; then
  /// sends it on the others too. The status line of each, the last one's first (15 s at most
  /// each: a connection still queued for want of descriptors shows as "no answer"). On a thread
  /// of its own: the sockets block.
  private static func statusLines(port: Int, connections: Int) async -> [String] {
    await withCheckedContinuation { continuation in
      Thread {
        var sockets: [Int32] = []
        defer { sockets.forEach { close($0) } }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var timeout = timeval(tv_sec: 15, tv_usec: 0)
        let request = Array("GET /config.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        for _ in 0..<connections {
          let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
          guard fd >= 0 else { break }
          sockets.append(fd)
          setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
          let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
              connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
          }
          guard connected == 0 else { break }
        }
        let ordered = sockets.suffix(1) + sockets.dropLast()
        let lines = ordered.map { fd -> String in
          _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
          var reply: [UInt8] = []
          var chunk = [UInt8](repeating: 0, count: 4096)
          while !reply.contains(UInt8(ascii: "\r")) {
            let count = recv(fd, &chunk, chunk.count, 0)
            if count <= 0 { return "no answer" }
            reply += chunk[..<count]
          }
          let line = reply.split(separator: UInt8(ascii: "\r")).first ?? []
          return String(decoding: line, as: UTF8.self)
        }
        continuation.resume(returning: lines)
      }.start()
    }
  }
}

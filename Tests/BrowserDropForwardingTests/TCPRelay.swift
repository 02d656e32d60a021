import Foundation
import Glibc

/// A TCP relay on 127.0.0.1 in front of a server's port, for tests: it counts the connections it
/// accepted and can cut them all at once, as a network that drops a client's connections does
/// (each side sees its connection end).
final class TCPRelay: @unchecked Sendable {
  /// The relay's own port: point the client here.
  let port: Int
  private let listener: Int32
  private let target: Int
  private let lock = NSLock()
  /// Open pairs (client side, server side); guarded by `lock`.
  private var pairs: [(Int32, Int32)] = []
  private var acceptedCount = 0

  /// How many connections the relay has accepted.
  var accepted: Int { lock.withLock { acceptedCount } }

  /// Starts relaying connections to `127.0.0.1:target`.
  init(to target: Int) throws {
    self.target = target
    let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    var address = Self.loopback(port: 0)
    let bound = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    guard listener >= 0, bound == 0, listen(listener, 16) == 0 else {
      let code = errno
      if listener >= 0 { close(listener) }
      throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
    }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
    }
    self.listener = listener
    port = Int(UInt16(bigEndian: address.sin_port))
    Thread.detachNewThread { [self] in acceptLoop() }
  }

  private static func loopback(port: Int) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
    return address
  }

  private func acceptLoop() {
    while true {
      let client = accept(listener, nil, nil)
      if client < 0 {
        if errno == EINTR { continue }
        return  // stop() shut the listener down.
      }
      let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
      var address = Self.loopback(port: target)
      let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
          connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
      }
      guard server >= 0, connected == 0 else {
        close(client)
        if server >= 0 { close(server) }
        continue
      }
      lock.withLock {
        pairs.append((client, server))
        acceptedCount += 1
      }
      Thread.detachNewThread { [self] in relay(client, server) }
    }
  }

  /// Copies bytes both ways until either side ends (or ``cut()`` shuts both down), then closes
  /// both.
  private func relay(_ client: Int32, _ server: Int32) {
    var fds = [
      pollfd(fd: client, events: Int16(POLLIN), revents: 0),
      pollfd(fd: server, events: Int16(POLLIN), revents: 0),
    ]
    var buffer = [UInt8](repeating: 0, count: 64 << 10)
    loop: while poll(&fds, 2, -1) >= 0 || errno == EINTR {
      for (index, entry) in fds.enumerated() where entry.revents != 0 {
        let count = read(entry.fd, &buffer, buffer.count)
        guard count > 0 else { break loop }
        let other = fds[1 - index].fd
        var sent = 0
        while sent < count {
          let written = buffer[sent..<count].withUnsafeBytes {
            write(other, $0.baseAddress, $0.count)
          }
          guard written > 0 else { break loop }
          sent += written
        }
      }
    }
    lock.withLock { pairs.removeAll { $0.0 == client } }
    shutdown(client, Int32(SHUT_RDWR))
    shutdown(server, Int32(SHUT_RDWR))
    close(client)
    close(server)
  }

  /// Cuts every open connection: both the client and the server see it end.
  func cut() {
    lock.withLock {
      for (client, server) in pairs {
        shutdown(client, Int32(SHUT_RDWR))
        shutdown(server, Int32(SHUT_RDWR))
      }
    }
  }

  /// Stops accepting and cuts every open connection.
  func stop() {
    shutdown(listener, Int32(SHUT_RDWR))
    close(listener)
    cut()
  }
}

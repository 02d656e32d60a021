import Glibc

/// Ports and listening sockets for tests, on 127.0.0.1 only.
package enum FreePort {
  /// A port nothing listens on (bound, then closed), below the kernel's ephemeral range
  /// (32768–60999 here): a released ephemeral port can be handed at once to a parallel test's
  /// listener on port 0 or to a client socket, and a test expecting "refused" then meets a
  /// parallel test's listener. Bounded attempts.
  package static func closed() throws -> Int {
    var lastError: (any Error)?
    for _ in 0..<50 {
      do {
        let listener = try silentListener(port: Int.random(in: 10_000..<20_000))
        close(listener.descriptor)
        return listener.port
      } catch {
        lastError = error
      }
    }
    throw lastError!
  }

  /// A socket that listens on `port` (any free one for 0) and never accepts: the kernel
  /// completes the handshake into the backlog and then nothing is ever said. The caller closes
  /// `descriptor`. `SO_REUSEADDR`, so a port whose connections a server just closed (left in
  /// TIME_WAIT) can be taken as another program would.
  package static func silentListener(port: Int = 0) throws -> (descriptor: Int32, port: Int) {
    // Close-on-exec: a process another test starts meanwhile must not keep it past `exec`.
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
    guard descriptor >= 0 else { throw HarnessError(description: "socket: errno \(errno)") }
    var one: Int32 = 1
    setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(descriptor, $0, length) == 0 && listen(descriptor, 16) == 0
          && getsockname(descriptor, $0, &length) == 0
      }
    }
    guard bound else {
      let code = errno
      close(descriptor)
      throw HarnessError(description: "bind or listen on 127.0.0.1:\(port): errno \(code)")
    }
    return (descriptor, Int(UInt16(bigEndian: address.sin_port)))
  }
}

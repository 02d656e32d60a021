import BrowserDropSystem
import CBrowserDropLinux
import Glibc

/// Why a listener could not be opened; the server reports it as the `BrowserDropError` case of
/// the same name.
enum ListenError: Error, Equatable {
  /// The port is out of range, taken or not permitted, for `reason` (a clause).
  case portUnavailable(port: Int, reason: String)
  /// The bind address is not an IPv4 or IPv6 literal.
  case invalidBindAddress(String)
}

/// A listening TCP socket.
final class Listener: Sendable {
  let socket: Socket
  /// The port actually bound (useful when 0 was asked for).
  let port: Int

  private init(socket: Socket, port: Int) {
    self.socket = socket
    self.port = port
  }

  /// Stops listening.
  func close() { socket.close() }

  /// Binds `address` (an IP literal; `nil` for every interface, IPv6 and IPv4 together) and
  /// listens. Port 80 falls back to 8080 when taken or not permitted, unless `fallback` is off.
  static func open(
    address: String?, port: Int, fallback: Bool = true
  ) throws(ListenError)
    -> Listener
  {
    guard (0...65535).contains(port) else {
      throw .portUnavailable(port: port, reason: "it is not between 0 and 65535")
    }
    if let address, SocketAddress.ipv4(address, port: 0) == nil,
      SocketAddress.ipv6(address, port: 0) == nil
    {
      throw .invalidBindAddress(address)
    }
    do {
      return try bind(address: address, port: port)
    } catch  where fallback && port == 80 && (error.code == EADDRINUSE || error.code == EACCES) {
      do {
        return try bind(address: address, port: 8080)
      } catch {
        throw .portUnavailable(port: 8080, reason: error.reason)
      }
    } catch {
      throw .portUnavailable(port: port, reason: error.reason)
    }
  }

  private static func bind(address: String?, port: Int) throws(SystemError) -> Listener {
    guard let address else {
      do {
        return try bind(SocketAddress.ipv6("::", port: port)!)
      } catch  where error.code == EAFNOSUPPORT {
        // No IPv6 on this machine: every IPv4 interface instead.
        return try bind(SocketAddress.ipv4("0.0.0.0", port: port)!)
      }
    }
    if let v4 = SocketAddress.ipv4(address, port: port) { return try bind(v4) }
    return try bind(SocketAddress.ipv6(address, port: port)!)
  }

  private static func bind<Address>(_ address: Address) throws(SystemError) -> Listener {
    let family = Int32(withUnsafeBytes(of: address) { $0.load(as: sa_family_t.self) })
    let fd = try Syscall.blocking("socket") {
      Glibc.socket(
        family, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
    }
    let socket = Socket(fd: fd)
    var one: Int32 = 1
    var zero: Int32 = 0
    let optionLength = socklen_t(MemoryLayout<Int32>.size)
    // A quick stop and start must not meet EADDRINUSE from connections in TIME_WAIT.
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, optionLength)
    if family == AF_INET6 {
      setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &zero, optionLength)
    }
    try withUnsafeBytes(of: address) { raw throws(SystemError) in
      let pointer = raw.baseAddress!.assumingMemoryBound(to: sockaddr.self)
      try Syscall.blocking("bind") { Glibc.bind(fd, pointer, socklen_t(raw.count)) }
    }
    try Syscall.blocking("listen") { Glibc.listen(fd, 1024) }
    var bound = sockaddr_storage()
    var boundLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
    _ = withUnsafeMutablePointer(to: &bound) { pointer in
      pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        getsockname(fd, $0, &boundLength)
      }
    }
    return Listener(socket: socket, port: SocketAddress.port(of: bound))
  }

  /// How many connections wait in the kernel's accept queue: complete, not yet accepted. Linux
  /// reports it for a listening socket in `tcp_info`'s `tcpi_unacked` (and the queue's bound,
  /// the listen backlog, in `tcpi_sacked`). 0 should `getsockopt` fail, which it does not on a
  /// listening TCP socket.
  var queuedConnections: Int {
    var info = tcp_info()
    var length = socklen_t(MemoryLayout<tcp_info>.size)
    guard getsockopt(socket.fd, Int32(IPPROTO_TCP), TCP_INFO, &info, &length) == 0 else { return 0 }
    return Int(info.tcpi_unacked)
  }

  /// Accepts one pending connection without waiting; `nil` when none is pending.
  func acceptNow() throws(SystemError) -> Int32? {
    try Syscall.nonBlocking("accept4") { cbd_accept(socket.fd) }
  }

  /// Waits until a connection is pending.
  func waitForConnection() async throws {
    try await Reactor.shared.wait(for: .readable, on: socket.fd)
  }
}

/// Parsing and formatting of socket addresses.
enum SocketAddress {
  static func ipv4(_ text: String, port: Int) -> sockaddr_in? {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    guard inet_pton(AF_INET, text, &address.sin_addr) == 1 else { return nil }
    return address
  }

  static func ipv6(_ text: String, port: Int) -> sockaddr_in6? {
    var address = sockaddr_in6()
    address.sin6_family = sa_family_t(AF_INET6)
    address.sin6_port = in_port_t(UInt16(port).bigEndian)
    guard inet_pton(AF_INET6, text, &address.sin6_addr) == 1 else { return nil }
    return address
  }

  static func port(of storage: sockaddr_storage) -> Int {
    let family = Int32(storage.ss_family)
    return withUnsafeBytes(of: storage) { raw in
      if family == AF_INET6 {
        return Int(UInt16(bigEndian: raw.load(as: sockaddr_in6.self).sin6_port))
      }
      return Int(UInt16(bigEndian: raw.load(as: sockaddr_in.self).sin_port))
    }
  }

  /// The numeric text of an IPv4 or IPv6 socket address.
  static func text(of address: UnsafePointer<sockaddr>) -> String? {
    var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
    switch Int32(address.pointee.sa_family) {
    case AF_INET:
      return address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
        var raw = v4.pointee.sin_addr
        guard inet_ntop(AF_INET, &raw, &buffer, socklen_t(buffer.count)) != nil else { return nil }
        return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
      }
    case AF_INET6:
      return address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
        var raw = v6.pointee.sin6_addr
        guard inet_ntop(AF_INET6, &raw, &buffer, socklen_t(buffer.count)) != nil else { return nil }
        return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
      }
    default:
      return nil
    }
  }
}

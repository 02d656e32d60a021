import BrowserDropForwarding
import BrowserDropSystem
import CBrowserDropLinux
import FoundationEssentials
import Glibc

/// The readings that need I/O — free space on the staging volume (`statvfs`) and whether the
/// destination answers — taken every few seconds on a blocking lane of their own, never on the
/// cooperative pool, and kept in ``OperationsState`` for scrapes to copy.
struct OperationsProbe: Sendable {
  /// Where the probe looks.
  enum Target: Sendable {
    /// A folder: it, or the nearest folder above it, is writable.
    case folder(String)
    /// A TCP connection to the SMB server's port.
    case server(host: String, port: Int)
  }

  let stagingRoot: String
  let target: Target?

  private static let lane = BlockingPool.serial(name: "bd-ops-probe")

  init(stagingRoot: URL, destination: DestinationChoice?) {
    self.stagingRoot = stagingRoot.path
    switch destination {
    case .local(let url): target = .folder(url.path)
    case .smb(let address, _):
      target = (try? SMBDestination(address)).map { .server(host: $0.host, port: $0.port) }
    case nil: target = nil
    }
  }

  /// The host a person knows the destination by, for the `STATUS=` line (`nas.local`).
  var destinationName: String? {
    switch target {
    case .folder(let path): path
    case .server(let host, _): host
    case nil: nil
    }
  }

  /// Takes both readings on the probe's lane.
  func measure() async -> (freeBytes: Int64?, reachable: Bool?) {
    let (root, target) = (stagingRoot, target)
    return
      (try? await Self.lane.run { () throws(SystemError) in
        var free: UInt64 = 0
        let freeBytes = cbd_free_bytes(root, &free) == 0 ? Int64(clamping: free) : nil
        return (freeBytes, target.map(Self.reachable))
      }) ?? (nil, nil)
  }

  private static func reachable(_ target: Target) -> Bool {
    switch target {
    case .folder(let path):
      var candidate = path
      while !candidate.isEmpty {
        if access(candidate, F_OK) == 0 { return access(candidate, W_OK | X_OK) == 0 }
        guard let slash = candidate.lastIndex(of: "/") else { return false }
        candidate = slash == candidate.startIndex ? "/" : String(candidate[..<slash])
        if candidate == "/" { return access("/", W_OK) == 0 }
      }
      return false
    case .server(let host, let port):
      return connects(host: host, port: port, timeoutMilliseconds: 2000)
    }
  }

  /// Whether a TCP connection to `host:port` opens within the timeout (names resolved with
  /// `getaddrinfo`, every address tried in turn).
  private static func connects(host: String, port: Int, timeoutMilliseconds: Int32) -> Bool {
    var hints = addrinfo()
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    var list: UnsafeMutablePointer<addrinfo>?
    guard getaddrinfo(host, String(port), &hints, &list) == 0, let list else { return false }
    defer { freeaddrinfo(list) }
    var entry: UnsafeMutablePointer<addrinfo>? = list
    while let current = entry {
      entry = current.pointee.ai_next
      guard
        let fd = try? Syscall.blocking(
          "socket",
          {
            socket(
              current.pointee.ai_family,
              Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
                | Int32(SOCK_CLOEXEC.rawValue), 0)
          })
      else { continue }
      let owned = FileDescriptor(owning: fd)
      let opened = opens(fd, to: current.pointee, timeoutMilliseconds: timeoutMilliseconds)
      try? owned.close()
      if opened { return true }
    }
    return false
  }

  private static func opens(
    _ fd: Int32, to address: addrinfo, timeoutMilliseconds: Int32
  ) -> Bool {
    if connect(fd, address.ai_addr, address.ai_addrlen) == 0 { return true }
    guard errno == EINPROGRESS else { return false }
    var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
    guard (try? Syscall.blocking("poll", { poll(&poller, 1, timeoutMilliseconds) })) == 1 else {
      return false
    }
    var failure: Int32 = 0
    var length = socklen_t(MemoryLayout<Int32>.size)
    return getsockopt(fd, SOL_SOCKET, SO_ERROR, &failure, &length) == 0 && failure == 0
  }
}

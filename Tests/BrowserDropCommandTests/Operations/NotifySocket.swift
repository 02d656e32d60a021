import BrowserDropSystem
import BrowserDropTestSupport
import Foundation
import Synchronization

/// A test's own `NOTIFY_SOCKET`: a datagram socket bound in a temporary folder, read by a thread
/// of its own, keeping every message with the monotonic time it arrived (as systemd reads them).
final class NotifySocket: Sendable {
  /// One datagram.
  struct Message: Sendable {
    let time: Double
    let text: String
  }

  /// The socket's path, for `NOTIFY_SOCKET`.
  let path: String
  private let fd: Int32
  private let state = Mutex<(messages: [Message], closed: Bool)>(([], false))

  init(in folder: TemporaryFolder) throws {
    path = folder.path("notify.sock").path
    fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw SystemError.last("socket") }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    precondition(bytes.count < MemoryLayout.size(ofValue: address.sun_path))
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
    let bound = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
      }
    }
    guard bound == 0 else { throw SystemError.last("bind") }
    // Woken every 100 ms to notice `close()`.
    var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    try SystemThread.start(name: "test-notify") { [self] in readLoop() }
  }

  /// Every message so far.
  var messages: [Message] { state.withLock { $0.messages } }

  /// The arrival times of the `WATCHDOG=1` pings so far.
  var watchdogTimes: [Double] {
    messages.filter { $0.text.split(separator: "\n").contains("WATCHDOG=1") }.map(\.time)
  }

  /// Waits (bounded) until a message satisfies `match`, and returns it.
  @discardableResult
  func waitFor(
    timeout: Double = 30, _ what: String, _ match: @escaping (String) -> Bool
  ) async throws -> Message {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
      if let found = messages.first(where: { match($0.text) }) { return found }
      try await Task.sleep(for: .milliseconds(20))
    }
    throw NotifyTimeout(what: what, seen: messages.map(\.text))
  }

  /// Stops reading and closes the socket.
  func close() {
    state.withLock { $0.closed = true }
  }

  private func readLoop() {
    var buffer = [UInt8](repeating: 0, count: 4096)
    while !state.withLock({ $0.closed }) {
      let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
      guard count > 0 else { continue }
      let message = Message(
        time: Self.monotonic(), text: String(decoding: buffer[..<count], as: UTF8.self))
      state.withLock { $0.messages.append(message) }
    }
    Glibc.close(fd)
    unlink(path)
  }

  static func monotonic() -> Double {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
  }
}

struct NotifyTimeout: Error, CustomStringConvertible {
  let what: String
  let seen: [String]
  var description: String { "no \(what) within the time allowed; seen: \(seen)" }
}

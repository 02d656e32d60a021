import BrowserDropSystem
import CBrowserDropLinux
import Dispatch
import FoundationEssentials
import Glibc
import Testing

@testable import BrowserDrop

/// The event loop's waits on real sockets: a descriptor joins the epoll set once, edge-triggered,
/// and stays armed; readiness that comes while no task waits is kept for the next wait.
@Suite("Reactor: edge-triggered waits")
struct ReactorTests {
  /// A connected pair of non-blocking stream sockets, closed when the test is done with them.
  final class Pair: Sendable {
    let near: Socket
    let far: Int32

    init() throws {
      var fds: [Int32] = [0, 0]
      try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
      for fd in fds { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
      near = Socket(fd: fds[0])
      far = fds[1]
    }

    deinit {
      near.close()
      Glibc.close(far)
    }

    func send(_ byte: UInt8 = 1) {
      var byte = byte
      #expect(Glibc.write(far, &byte, 1) == 1)
    }

    /// Reads what `near` holds until it would block; how many bytes.
    func drainNear() -> Int {
      var total = 0
      var buffer = [UInt8](repeating: 0, count: 65536)
      while true {
        let count = buffer.withUnsafeMutableBytes { Glibc.read(near.fd, $0.baseAddress, $0.count) }
        if count <= 0 { return total }
        total += count
      }
    }
  }

  init() throws { try Reactor.shared.start() }

  /// Starts `peer` on a thread of its own at once (not from a child task, which could wait for
  /// a thread of the cooperative pool longer than the test's deadlines); the returned stream
  /// ends when the peer has. The peer's calls block, and neither a task nor
  /// `DispatchQueue.global()` would do: both run on the cooperative pool's threads here.
  private static func startPeer(_ peer: @escaping @Sendable () -> Void) throws -> AsyncStream<Void>
  {
    let (ended, ending) = AsyncStream<Void>.makeStream()
    try SystemThread.start(name: "test peer") {
      peer()
      ending.finish()
    }
    return ended
  }

  private static func soon() -> Deadline { .instant(.now + .seconds(10)) }

  /// The kernel's line for `fd` in the epoll set (`tfd: … events: … data: …`), if any.
  private static func epollLine(for fd: Int32) throws -> String? {
    let epollFD = try #require(Reactor.shared.epollDescriptorForTesting)
    let text = try String(contentsOfFile: "/proc/self/fdinfo/\(epollFD)", encoding: .utf8)
    return text.split(separator: "\n").map(String.init).first { line in
      let fields = line.split(separator: " ", omittingEmptySubsequences: true)
      return fields.first == "tfd:" && fields.dropFirst().first == Substring("\(fd)")
    }
  }

  /// The event mask of that line.
  private static func events(in line: String) -> UInt32? {
    let fields = line.split(separator: " ", omittingEmptySubsequences: true)
    guard let index = fields.firstIndex(of: "events:"), index + 1 < fields.count else { return nil }
    return UInt32(fields[index + 1], radix: 16)
  }

  @Test func aDescriptorJoinsOnceAndStaysArmedBetweenWaits() async throws {
    let pair = try Pair()
    #expect(try Self.epollLine(for: pair.near.fd) == nil)
    for _ in 0..<50 {
      pair.send()
      try await Reactor.shared.wait(for: .readable, on: pair.near.fd, deadline: Self.soon())
      _ = pair.drainNear()
    }
    // A one-shot registration shows its mask cleared once it fired; this one keeps it.
    let line = try #require(try Self.epollLine(for: pair.near.fd))
    let mask = try #require(Self.events(in: line))
    #expect(mask & UInt32(bitPattern: cbd_epollet()) != 0, "\(line)")
    #expect(mask & UInt32(cbd_epollin() | cbd_epollout() | cbd_epollrdhup()) != 0, "\(line)")
    pair.near.close()
    #expect(try Self.epollLine(for: pair.near.fd) == nil)
  }

  @Test func noWakeUpIsMissedWhenDataRacesTheWait() async throws {
    let pair = try Pair()
    let rounds = 2000
    // Another thread writes a byte whenever the reader has taken the last one, so each byte
    // races the reader's next wait: its edge reaches a waiter or is kept for the wait to come.
    // It gives up should the reader stop taking them for a minute (a failed wait), so it
    // always ends.
    let taken = DispatchSemaphore(value: 0)
    let writer = try Self.startPeer {
      for _ in 0..<rounds {
        var byte: UInt8 = 7
        _ = Glibc.write(pair.far, &byte, 1)
        guard taken.wait(timeout: .now() + .seconds(60)) == .success else { return }
      }
    }
    var received = 0
    while received < rounds {
      let count = pair.drainNear()
      received += count
      for _ in 0..<count { taken.signal() }
      if received < rounds {
        try await Reactor.shared.wait(
          for: .readable, on: pair.near.fd, deadline: .instant(.now + .seconds(5)))
      }
    }
    for await _ in writer {}
    #expect(received == rounds)
  }

  @Test func aWriterWakesWhenThePeerDrainsAFullBuffer() async throws {
    let pair = try Pair()
    let chunk = [UInt8](repeating: 0x55, count: 65536)
    var filled = 0
    while true {
      let sent = chunk.withUnsafeBytes { send(pair.near.fd, $0.baseAddress, $0.count, 0) }
      if sent <= 0 { break }
      filled += sent
    }
    #expect(errno == EAGAIN && filled > 0)
    let total = filled
    // The peer drains on a thread of its own until it has everything, the socket fails or
    // 10 s pass; it holds `pair`, so the descriptor outlives it.
    let drainer = try Self.startPeer {
      var buffer = [UInt8](repeating: 0, count: 65536)
      var drained = 0
      let giveUp = ContinuousClock.now + .seconds(10)
      while drained < total, ContinuousClock.now < giveUp {
        let count = buffer.withUnsafeMutableBytes { recv(pair.far, $0.baseAddress, $0.count, 0) }
        if count > 0 {
          drained += count
        } else if count == 0 || errno != EAGAIN {
          return
        } else {
          var ready = pollfd(fd: pair.far, events: Int16(POLLIN), revents: 0)
          _ = poll(&ready, 1, 100)
        }
      }
    }
    try await Reactor.shared.wait(for: .writable, on: pair.near.fd, deadline: Self.soon())
    let sent = chunk.withUnsafeBytes { send(pair.near.fd, $0.baseAddress, 1, 0) }
    #expect(sent == 1)
    for await _ in drainer {}
  }

  @Test func aPeerThatClosesEndsAReadersWait() async throws {
    let pair = try Pair()
    let peer = try Self.startPeer { _ = shutdown(pair.far, Int32(SHUT_WR)) }
    try await Reactor.shared.wait(for: .readable, on: pair.near.fd, deadline: Self.soon())
    for await _ in peer {}
    var byte: UInt8 = 0
    #expect(Glibc.read(pair.near.fd, &byte, 1) == 0)
  }

  @Test func aWaitForReadingLeavesAnEdgeForWritingKept() async throws {
    let pair = try Pair()
    pair.send()
    // The first edge reports the socket readable and writable; the reader takes only its part.
    // No other edge for writing ever comes (the buffer never fills): only the kept one can end
    // the second wait.
    try await Reactor.shared.wait(for: .readable, on: pair.near.fd, deadline: Self.soon())
    #expect(pair.drainNear() == 1)
    try await Reactor.shared.wait(
      for: .writable, on: pair.near.fd, deadline: .instant(.now + .seconds(2)))
  }
}

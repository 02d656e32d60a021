import BrowserDropTestSupport
import Foundation
import Testing

@testable import BrowserDrop

/// The server's timing rules on a manual clock: exact, and without sleeping.
@Suite("Timing rules on a manual clock")
struct TimingRuleTests {
  struct Started {
    let server: BrowserDropServer
    let clock: ManualClock
    let port: Int
    let root: URL

    func stop() async {
      await server.cancel()
      try? FileManager.default.removeItem(at: root)
    }
  }

  static func start() async throws -> Started {
    let root = FileManager.default.temporaryDirectory.appending(path: "bd-clock-\(UUID())")
    let clock = ManualClock()
    let server = BrowserDropServer(
      configuration: .init(
        reservedFreeSpace: 0, stagingRoot: root, port: 0, bindAddress: "127.0.0.1"),
      pageBundle: PageSource.bundledFiles, clock: clock)
    let port = try await server.start()[0].port
    return Started(server: server, clock: clock, port: port, root: root)
  }

  /// One list when the upload starts, the next exactly 100 ms later on the clock, not before.
  @Test func progressIsPublishedEveryHundredMilliseconds() async throws {
    let session = try await Self.start()
    defer { Task { await session.stop() } }
    var lists = session.server.progress.makeAsyncIterator()
    let client = try await RawClient.connect(port: session.port)
    try await client.send(Requests.uploadHead(port: session.port, encodedPath: "p.bin", length: 10))
    try await client.send(TestBytes.make(4))
    let first = try #require(await lists.next())
    #expect(first.map(\.upload.relativePath) == ["p.bin"])
    await session.clock.sleeper(until: .milliseconds(100))
    session.clock.advance(by: .milliseconds(99))
    #expect(session.clock.deadlines.contains(.milliseconds(100)), "woke before its interval")
    session.clock.advance(by: .milliseconds(1))
    let second = try #require(await lists.next())
    #expect(second.first?.upload.relativePath == "p.bin")
    await session.clock.sleeper(until: .milliseconds(200))
    try await client.send(TestBytes.make(6))
    #expect(try await client.readReply().status == 201)
    session.clock.advance(by: .milliseconds(100))
    // The upload has ended: the next turn publishes the empty list and stops.
    var last = try #require(await lists.next())
    while !last.isEmpty { last = try #require(await lists.next()) }
    #expect(!session.clock.deadlines.contains(.milliseconds(300)))
    // So a wait for a sleeper at 300 ms ends in an issue within its bound, not in a hang:
    // `ConnectionTests` once waited so for a turn that never came, and the run never ended.
    await withKnownIssue("the progress task ended instead of sleeping again") {
      await session.clock.sleeper(until: .milliseconds(300), within: .milliseconds(500))
    }
  }

  /// The addresses are looked at again every 2 s of the clock, for as long as the session lasts.
  @Test func addressesArePolledEveryTwoSeconds() async throws {
    let session = try await Self.start()
    await session.clock.sleeper(until: .seconds(2))
    session.clock.advance(by: .milliseconds(1999))
    #expect(session.clock.deadlines == [.seconds(2)])
    session.clock.advance(by: .milliseconds(1))
    await session.clock.sleeper(until: .seconds(4))
    #expect(session.clock.deadlines == [.seconds(4)])
    await session.stop()
    #expect(session.clock.deadlines.isEmpty, "the poll outlived the session")
  }

  /// `resume()` tries a port still held elsewhere again after 50 ms of the clock.
  @Test func resumeRetriesAHeldPortEveryFiftyMilliseconds() async throws {
    let session = try await Self.start()
    defer { Task { await session.stop() } }
    await session.server.suspend()
    var holder: Listener? = try Listener.open(
      address: "127.0.0.1", port: session.port, fallback: false)
    let resumed = Task { try await session.server.resume() }
    let now = session.clock.now
    await session.clock.sleeper(until: now + .milliseconds(50))
    holder?.close()
    holder = nil
    session.clock.advance(by: .milliseconds(50))
    try await resumed.value
    #expect(await session.server.port == session.port)
    #expect((try? await RawClient.connect(port: session.port)) != nil)
  }
}

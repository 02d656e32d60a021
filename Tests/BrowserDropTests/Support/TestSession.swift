import BrowserDropTestSupport
import Foundation
import Testing

@testable import BrowserDrop

/// Collects a server's events so tests can wait for the ones they expect, with a bound.
actor EventLog {
  private(set) var events: [Event] = []
  private var waiters:
    [UInt64: (
      predicate: @Sendable ([Event]) -> Bool, continuation: CheckedContinuation<[Event], any Error>
    )] = [:]
  private var nextWaiter: UInt64 = 0
  private var ended = false

  struct TimedOut: Error, CustomStringConvertible {
    let events: [Event]
    var description: String { "timed out waiting; events so far: \(events)" }
  }

  init(_ stream: AsyncStream<Event>) {
    Task { [weak self] in
      for await event in stream { await self?.append(event) }
      await self?.end()
    }
  }

  private func append(_ event: Event) {
    events.append(event)
    for (id, waiter) in waiters where waiter.predicate(events) {
      waiters.removeValue(forKey: id)
      waiter.continuation.resume(returning: events)
    }
  }

  private func end() { ended = true }

  /// Waits until `predicate` holds for the events so far; fails after `timeout`.
  @discardableResult
  func wait(
    timeout: Duration = .seconds(20), until predicate: @escaping @Sendable ([Event]) -> Bool
  ) async throws -> [Event] {
    if predicate(events) { return events }
    let id = nextWaiter
    nextWaiter += 1
    return try await withCheckedThrowingContinuation { continuation in
      waiters[id] = (predicate, continuation)
      Task { [weak self] in
        try? await Task.sleep(for: timeout)
        await self?.expire(id)
      }
    }
  }

  private func expire(_ id: UInt64) {
    guard let waiter = waiters.removeValue(forKey: id) else { return }
    waiter.continuation.resume(throwing: TimedOut(events: events))
  }

  var finished: [ReceivedFile] {
    events.compactMap { if case .uploadFinished(let file) = $0 { file } else { nil } }
  }

  var failed: [(Upload, FailureReason)] {
    events.compactMap {
      if case .uploadFailed(let upload, let reason) = $0 { (upload, reason) } else { nil }
    }
  }
}

extension Event {
  var isUploadEvent: Bool {
    switch self {
    case .uploadStarted, .uploadFinished, .uploadFailed: true
    default: false
    }
  }
}

/// A real server on 127.0.0.1 with its own staging root, for one test.
struct TestSession {
  let server: BrowserDropServer
  let port: Int
  let log: EventLog
  let root: URL

  /// `pageBundle` replaces the page embedded from `Page/` (an empty one: a build without it).
  /// With `handover`, the server serves the socket an earlier session handed over.
  static func start(
    pageBundle: [String: [UInt8]] = PageSource.bundledFiles,
    clock: any SessionClock = SystemSessionClock(),
    on handover: ListenerHandover? = nil,
    _ configure: (inout BrowserDropServer.Configuration) -> Void = { _ in }
  ) async throws -> TestSession {
    let root = FileManager.default.temporaryDirectory.appending(
      path: "bd-test-\(UUID().uuidString)")
    var configuration = BrowserDropServer.Configuration()
    configuration.port = 0
    configuration.bindAddress = "127.0.0.1"
    configuration.stagingRoot = root
    configuration.reservedFreeSpace = 0
    configure(&configuration)
    let server = BrowserDropServer(
      configuration: configuration, pageBundle: pageBundle, clock: clock)
    let log = EventLog(server.events)
    let addresses =
      if let handover { try await server.start(on: handover) } else { try await server.start() }
    return TestSession(server: server, port: addresses[0].port, log: log, root: root)
  }

  /// Starts on a port below the kernel's ephemeral range (32768–60999 here), for tests that
  /// suspend and resume: while the listener is closed, a port from that range can be handed to
  /// another test's client socket as its local port, and the resume then meets
  /// `EADDRINUSE`. A port chosen here never is. Taken ports are skipped (bounded attempts).
  static func startOutsideEphemeralPorts() async throws -> TestSession {
    var lastError: (any Error)?
    for _ in 0..<50 {
      let port = Int.random(in: 20_000..<32_000)
      do {
        return try await start { $0.port = port }
      } catch {
        lastError = error
      }
    }
    throw lastError!
  }

  /// Cancels the session and removes the staging root.
  func stop() async {
    await server.cancel()
    try? FileManager.default.removeItem(at: root)
  }

  func client() async throws -> RawClient { try await RawClient.connect(port: port) }

  /// Uploads `body` as `path` (percent-encoded per segment) and returns the reply.
  func upload(_ path: String, _ body: [UInt8], extra: [String] = []) async throws -> HTTPReply {
    try await upload(encodedPath: Requests.encode(path), body, extra: extra)
  }

  func upload(encodedPath: String, _ body: [UInt8], extra: [String] = []) async throws -> HTTPReply
  {
    let client = try await client()
    try await client.send(
      Requests.uploadHead(port: port, encodedPath: encodedPath, length: body.count, extra: extra))
    try? await client.send(body)
    return try await client.readReply()
  }

  /// Sends a raw request (head and any body) and reads the reply.
  func exchange(_ request: String) async throws -> HTTPReply {
    let client = try await client()
    try await client.send(request)
    return try await client.readReply()
  }

  func get(_ target: String, host: String? = nil) async throws -> HTTPReply {
    try await exchange("GET \(target) HTTP/1.1\r\nHost: \(host ?? "127.0.0.1:\(port)")\r\n\r\n")
  }

  /// Files under the session folder, relative path → bytes (hidden entries included).
  func stagedFiles() -> [String: [UInt8]] {
    var result: [String: [UInt8]] = [:]
    let base = server.sessionFolder.path
    guard let walker = FileManager.default.enumerator(atPath: base) else { return result }
    while let relative = walker.nextObject() as? String {
      var isDirectory: ObjCBool = false
      _ = FileManager.default.fileExists(atPath: base + "/" + relative, isDirectory: &isDirectory)
      if !isDirectory.boolValue {
        result[relative] =
          (try? [UInt8](Data(contentsOf: URL(fileURLWithPath: base + "/" + relative)))) ?? []
      }
    }
    return result
  }

  /// Everything in the staging root other than the session folder (partials, leftovers).
  func incomingEntries() -> [String] {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []
    var entries: [String] = []
    for name in names where name.hasSuffix(".incoming") {
      entries +=
        (try? FileManager.default.contentsOfDirectory(atPath: root.path + "/" + name)) ?? []
    }
    return entries
  }
}

/// Deterministic bytes for bodies.
struct TestBytes {
  static func make(_ count: Int, seed: UInt64 = 1) -> [UInt8] {
    var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
    var bytes = [UInt8](repeating: 0, count: count)
    bytes.withUnsafeMutableBytes { raw in
      var index = 0
      while index < count {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        withUnsafeBytes(of: state) { word in
          let take = min(8, count - index)
          raw.baseAddress!.advanced(by: index).copyMemory(from: word.baseAddress!, byteCount: take)
        }
        index += 8
      }
    }
    return bytes
  }
}

import Foundation
import Testing

@testable import BrowserDrop

@Suite("Connections: drops, stalls, trickles, the cap, events and progress")
struct ConnectionTests {
  @Test func aDroppedUploadLeavesNothingAndTheRetrySucceeds() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    do {
      let client = try await session.client()
      try await client.send(
        Requests.uploadHead(port: session.port, encodedPath: "a/b.bin", length: 1 << 20))
      try await client.send(TestBytes.make(300_000))
      try await session.log.wait { events in
        events.contains { if case .uploadStarted = $0 { true } else { false } }
      }
      client.socket.close()
    }
    let events = try await session.log.wait {
      $0.contains { if case .uploadFailed = $0 { true } else { false } }
    }
    #expect(
      events.contains(
        .uploadFailed(Upload(id: 1, relativePath: "a/b.bin", size: 1 << 20), .connectionLost)))
    #expect(session.stagedFiles().isEmpty)
    #expect(session.incomingEntries().isEmpty)
    #expect(await session.server.receivedFiles.isEmpty)
    let body = TestBytes.make(1 << 20)
    #expect(try await session.upload("a/b.bin", body).status == 201)
    #expect(session.stagedFiles() == ["a/b.bin": body])
  }

  @Test func aStalledBodyTimesOutAndAnIdleConnectionIsClosedSilently() async throws {
    let session = try await TestSession.start { $0.idleTimeout = .seconds(1) }
    defer { Task { await session.stop() } }
    let stalled = try await session.client()
    try await stalled.send(
      Requests.uploadHead(port: session.port, encodedPath: "s.bin", length: 100))
    // The server keeps time on its own thread; when a loaded machine holds this task back for
    // longer than the idle timeout, the server has already closed the connection (EPIPE here),
    // which is the outcome checked below anyway.
    try? await stalled.send(TestBytes.make(10))
    let idle = try await session.client()
    let halfHead = try await session.client()
    try? await halfHead.send("POST /upload?path=x HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    #expect(try await idle.closedSilently())
    #expect(try await halfHead.closedSilently())
    #expect(try await stalled.closedSilently())
    let events = try await session.log.wait {
      $0.contains { if case .uploadFailed = $0 { true } else { false } }
    }
    #expect(
      events.contains(.uploadFailed(Upload(id: 1, relativePath: "s.bin", size: 100), .timedOut)))
    #expect(session.incomingEntries().isEmpty)
  }

  @Test func aSlowBodyThatKeepsTricklingIsLeftAlone() async throws {
    let session = try await TestSession.start { $0.idleTimeout = .seconds(1) }
    defer { Task { await session.stop() } }
    let client = try await session.client()
    let body = TestBytes.make(16)
    try await client.send(
      Requests.uploadHead(port: session.port, encodedPath: "slow.bin", length: body.count))
    // 16 pieces, 100 ms apart: 1.6 s in all, beyond the idle timeout, never idle for it.
    for index in 0..<body.count {
      try await client.send([body[index]])
      try await Task.sleep(for: .milliseconds(100))
    }
    #expect(try await client.readReply().status == 201)
    #expect(session.stagedFiles() == ["slow.bin": body])
  }

  @Test func connectionsOverTheCapAreClosedAtOnce() async throws {
    let session = try await TestSession.start { $0.maximumConnections = 4 }
    defer { Task { await session.stop() } }
    var held: [RawClient] = []
    for index in 0..<4 {
      // Uploads whose bodies have started: proof that the server accepted each connection.
      let client = try await session.client()
      try await client.send(
        Requests.uploadHead(port: session.port, encodedPath: "held\(index)", length: 10))
      try await client.send([1])
      held.append(client)
    }
    try await session.log.wait {
      $0.filter { if case .uploadStarted = $0 { true } else { false } }.count == 4
    }
    var refusedCount = 0
    for _ in 0..<3 {
      let extra = try await session.client()
      if try await extra.closedSilently() { refusedCount += 1 }
    }
    #expect(refusedCount == 3)
    for client in held { client.socket.close() }
    try await session.log.wait {
      $0.filter { if case .uploadFailed = $0 { true } else { false } }.count == 4
    }
    // Once they are gone, requests are served again (the server notices the closes at once).
    var served = false
    for _ in 0..<50 where !served {
      served = (try? await session.get("/config.json").status) == 200
    }
    #expect(served)
  }

  @Test func progressReportsBytesInFlightAndEndsEmpty() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let client = try await session.client()
    let total = 4 << 20
    try await client.send(
      Requests.uploadHead(port: session.port, encodedPath: "p.bin", length: total))
    try await client.send(TestBytes.make(total / 2))
    var sawHalf = false
    var sawEmptyAfterFinish = false
    var sentRest = false
    var timestamps: [ContinuousClock.Instant] = []
    for await list in session.server.progress {
      timestamps.append(.now)
      if let item = list.first, item.upload.relativePath == "p.bin" {
        #expect(item.upload.size == total)
        #expect(item.receivedBytes <= total)
        if item.receivedBytes == total / 2 { sawHalf = true }
        if sawHalf && !sentRest {
          sentRest = true
          try await client.send(TestBytes.make(total / 2))
          #expect(try await client.readReply().status == 201)
        }
      } else if list.isEmpty && sentRest {
        sawEmptyAfterFinish = true
        break
      }
    }
    #expect(sawHalf && sawEmptyAfterFinish)
    // Throttled to about ten lists a second.
    if let first = timestamps.first, let last = timestamps.last {
      let elapsed = first.duration(to: last) / .milliseconds(100)
      #expect(Double(timestamps.count) <= elapsed + 2)
    }
  }

  @Test func everyStartedUploadEndsWithExactlyOneOutcome() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    try await withThrowingTaskGroup(of: Void.self) { group in
      for index in 0..<20 {
        group.addTask {
          if index % 4 == 3 {
            let client = try await session.client()
            try await client.send(
              Requests.uploadHead(port: session.port, encodedPath: "f\(index)", length: 100))
            try await client.send([1, 2, 3])
            try await session.log.wait { events in
              events.contains {
                if case .uploadStarted(let upload) = $0 {
                  upload.relativePath == "f\(index)"
                } else {
                  false
                }
              }
            }
            client.socket.close()
          } else {
            _ = try await session.upload("f\(index)", TestBytes.make(1000 * index))
          }
        }
      }
      try await group.waitForAll()
    }
    let events = try await session.log.wait { events in
      events.filter { if case .uploadStarted = $0 { false } else { $0.isUploadEvent } }.count == 20
    }
    var open: [UInt64: String] = [:]
    for event in events {
      switch event {
      case .uploadStarted(let upload):
        #expect(open[upload.id] == nil)
        open[upload.id] = upload.relativePath
      case .uploadFinished(let file):
        #expect(open.values.contains(file.relativePath))
        open = open.filter { $0.value != file.relativePath }
      case .uploadFailed(let upload, _):
        #expect(open.removeValue(forKey: upload.id) != nil)
      default: break
      }
    }
    #expect(open.isEmpty)
    #expect(await session.log.finished.count == 15)
    #expect(await session.log.failed.count == 5)
  }
}

import BrowserDropTestSupport
import CBrowserDropLinux
import Foundation
import Glibc
import Testing

@testable import BrowserDrop

/// Every row of protocol v1's error table, answered before the body is read.
@Suite("Protocol v1 errors")
struct ProtocolErrorTests {
  @Test func unreadableRequestsAreBadRequests() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let host = "Host: 127.0.0.1:\(session.port)"
    let requests = [
      "garbage\r\n\r\n",
      "GET / HTTP/2.0\r\n\(host)\r\n\r\n",
      "GET  / HTTP/1.1\r\n\(host)\r\n\r\n",
      "GET / HTTP/1.1\r\n\(host)\r\n folded: value\r\n\r\n",
      "GET / HTTP/1.1\n\(host)\n\n",
      "GET / HTTP/1.1\r\n\(host)\r\nBad Name: x\r\n\r\n",
      "GET / HTTP/1.1\r\n\(host)\r\nX: a\u{1}b\r\n\r\n",
      "GET / HTTP/1.1\r\n\r\n",
      "GET / HTTP/1.1\r\n\(host)\r\n\(host)\r\n\r\n",
      "POST /upload?path=a.txt HTTP/1.1\r\n\(host)\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
      "POST /upload?path=a.txt HTTP/1.1\r\n\(host)\r\nContent-Length: -1\r\n\r\n",
      "POST /upload?path=a.txt HTTP/1.1\r\n\(host)\r\nContent-Length: 1x\r\n\r\n",
      "POST /upload?path=a.txt HTTP/1.1\r\n\(host)\r\nContent-Length: 1, 1\r\n\r\n",
      "POST /upload?path=a.txt HTTP/1.1\r\n\(host)\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
    ]
    for request in requests {
      let reply = try await session.exchange(request)
      #expect(reply.status == 400, "\(request.debugDescription)")
      #expect(reply.errorCode == "bad_request", "\(request.debugDescription)")
    }
    #expect(await session.log.events.isEmpty)
  }

  @Test func missingLengthOrChunkedIsLengthRequired() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    for extra in [[], ["Transfer-Encoding: chunked"]] {
      let reply = try await session.exchange(
        Requests.uploadHead(port: session.port, encodedPath: "a.txt", length: nil, extra: extra))
      #expect(reply.status == 411)
      #expect(reply.errorCode == "length_required")
    }
  }

  @Test func otherMethodsAreNotAllowed() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let host = "Host: 127.0.0.1:\(session.port)"
    for request in [
      "PUT /upload?path=a.txt HTTP/1.1\r\n\(host)\r\nContent-Length: 0\r\n\r\n",
      "DELETE /a.txt HTTP/1.1\r\n\(host)\r\n\r\n",
      "HEAD / HTTP/1.1\r\n\(host)\r\n\r\n",
      "OPTIONS * HTTP/1.1\r\n\(host)\r\n\r\n",
      "POST /elsewhere HTTP/1.1\r\n\(host)\r\nContent-Length: 0\r\n\r\n",
    ] {
      let reply = try await session.exchange(request)
      #expect(reply.status == 405, "\(request)")
      #expect(reply.errorCode == "method_not_allowed")
    }
  }

  @Test func oversizedHeadsAreRefused() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let padding = (0..<400).map { "X-Filler-\($0): \(String(repeating: "a", count: 40))" }
    let reply = try await session.exchange(
      Requests.uploadHead(port: session.port, encodedPath: "a.txt", length: 1, extra: padding))
    #expect(reply.status == 431)
    #expect(reply.errorCode == "headers_too_large")
    // A head just under the limit is fine.
    let small = (0..<200).map { "X-Filler-\($0): \(String(repeating: "a", count: 40))" }
    let accepted = try await session.exchange(
      Requests.uploadHead(port: session.port, encodedPath: "a.txt", length: 1, extra: small) + "x")
    #expect(accepted.status == 201)
  }

  @Test func tooLargeAndUnsupportedTypesAreRefusedBeforeTheBody() async throws {
    let session = try await TestSession.start {
      $0.maximumFileSize = 10
      $0.allowedExtensions = ["MP3", "m4b"]
    }
    defer { Task { await session.stop() } }
    let cases: [(String, Int, Int, String)] = [
      ("song.txt", 1, 400, "unsupported_type"),
      ("noextension", 1, 400, "unsupported_type"),
      ("song.MP3", 11, 413, "too_large"),
      ("book.M4B", 10, 201, ""),
    ]
    for (path, length, status, code) in cases {
      let client = try await session.client()
      try await client.send(
        Requests.uploadHead(
          port: session.port, encodedPath: path, length: length, extra: ["Expect: 100-continue"]))
      var reply = try await client.readReply()
      if reply.status == 100 {
        try await client.send(TestBytes.make(length))
        reply = try await client.readReply()
      }
      #expect(reply.status == status, "\(path)")
      if !code.isEmpty { #expect(reply.errorCode == code) }
    }
    let uploadEvents = await session.log.events.filter(\.isUploadEvent)
    #expect(uploadEvents.count == 2)  // only the accepted upload started
  }

  @Test func aRefusedBodyThatIsSentAnywayStillGetsTheAnswer() async throws {
    let session = try await TestSession.start { $0.maximumFileSize = 1000 }
    defer { Task { await session.stop() } }
    let client = try await session.client()
    try await client.send(
      Requests.uploadHead(port: session.port, encodedPath: "big.bin", length: 4 << 20))
    try? await client.send(TestBytes.make(4 << 20))
    let reply = try await client.readReply()
    #expect(reply.status == 413)
  }

  @Test func insufficientStorageCountsInFlightUploads() async throws {
    var free: UInt64 = 0
    #expect(cbd_free_bytes(FileManager.default.temporaryDirectory.path, &free) == 0)
    // Margins of many gigabytes, so that whatever else writes to this disk meanwhile changes
    // nothing (the check is relative to what is free, so the disk needs no such space):
    // one 12 GiB upload fits in 20 GiB, a second one while the first is in flight does not.
    let gib = 1 << 30
    let session = try await TestSession.start { $0.reservedFreeSpace = Int(free) - 20 * gib }
    defer { Task { await session.stop() } }
    let first = try await session.client()
    try await first.send(
      Requests.uploadHead(port: session.port, encodedPath: "one.bin", length: 12 * gib))
    try await first.send([1])
    try await session.log.wait {
      $0.contains { if case .uploadStarted = $0 { true } else { false } }
    }
    let second = try await session.client()
    try await second.send(
      Requests.uploadHead(
        port: session.port, encodedPath: "two.bin", length: 12 * gib,
        extra: ["Expect: 100-continue"]))
    let refused = try await second.readReply()
    #expect(refused.status == 507)
    #expect(refused.errorCode == "insufficient_storage")
    // Once the first is gone, the same upload is admitted.
    first.socket.close()
    try await session.log.wait {
      $0.contains { if case .uploadFailed = $0 { true } else { false } }
    }
    let third = try await session.client()
    try await third.send(
      Requests.uploadHead(
        port: session.port, encodedPath: "two.bin", length: 12 * gib,
        extra: ["Expect: 100-continue"]))
    #expect(try await third.readReply().status == 100)
  }

  @Test func aReservationLargerThanTheDiskStillStartsAndRefuses() async throws {
    let session = try await TestSession.start { $0.reservedFreeSpace = Int.max / 2 }
    defer { Task { await session.stop() } }
    let reply = try await session.upload("a.txt", [1])
    #expect(reply.status == 507)
  }

  @Test func nameConflictsAreRefusedWithoutChangingAnything() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    #expect(try await session.upload("x/y.mp3", [1]).status == 201)
    #expect(try await session.upload("z.mp3", [2]).status == 201)
    for path in ["x", "z.mp3/inner.mp3", "x/y.mp3/deeper.mp3"] {
      let reply = try await session.upload(path, [9])
      #expect(reply.status == 409, "\(path)")
      #expect(reply.errorCode == "path_conflict")
    }
    #expect(session.stagedFiles() == ["x/y.mp3": [1], "z.mp3": [2]])
  }

  @Test func caseVariantsConflictOnCaseInsensitiveVolumes() {
    var index = SessionIndex(caseInsensitive: true)
    let path = try! UploadPath(validating: "Music/A.mp3")
    index.insert(
      ReceivedFile(
        relativePath: path.value, size: 1, url: URL(fileURLWithPath: "/x"), receivedAt: Date(),
        mimeType: nil, kind: .other),
      at: path)
    #expect(index.conflict(for: try! UploadPath(validating: "Music/a.mp3"))?.error == .pathConflict)
    #expect(index.conflict(for: try! UploadPath(validating: "music/b.mp3"))?.error == .pathConflict)
    #expect(index.conflict(for: try! UploadPath(validating: "Music/A.mp3")) == nil)
    let sensitive = SessionIndex(caseInsensitive: false)
    #expect(sensitive.conflict(for: try! UploadPath(validating: "Music/a.mp3")) == nil)
  }

  @Test func aConflictThatAppearsWhileTheBodyArrivesIsRefusedAtStore() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let slow = try await session.client()
    try await slow.send(Requests.uploadHead(port: session.port, encodedPath: "d", length: 4))
    try await session.log.wait {
      $0.contains { if case .uploadStarted = $0 { true } else { false } }
    }
    #expect(try await session.upload("d/inner.txt", [1]).status == 201)
    try await slow.send("body")
    let reply = try await slow.readReply()
    #expect(reply.status == 409)
    let events = try await session.log.wait {
      $0.contains { if case .uploadFailed = $0 { true } else { false } }
    }
    #expect(
      events.contains(.uploadFailed(Upload(id: 1, relativePath: "d", size: 4), .pathConflict)))
    #expect(session.stagedFiles() == ["d/inner.txt": [1]])
    #expect(session.incomingEntries().isEmpty)
  }

  @Test func aStorageFailureIsWriteFailed() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    // Take away the folder partial files are written to.
    let incoming = try FileManager.default.contentsOfDirectory(atPath: session.root.path).first {
      $0.hasSuffix(".incoming")
    }
    try FileManager.default.removeItem(at: session.root.appending(path: try #require(incoming)))
    let reply = try await session.upload("a.txt", [1])
    #expect(reply.status == 500)
    #expect(reply.errorCode == "write_failed")
    let events = try await session.log.wait {
      $0.contains { if case .uploadFailed = $0 { true } else { false } }
    }
    #expect(events.filter(\.isUploadEvent).count == 2)
  }
}

import BrowserDropTestSupport
import Foundation
import Synchronization
import Testing

@testable import BrowserDrop

@Suite("Uploads against the real server on 127.0.0.1")
struct UploadTests {
  @Test func smallUploadIsStoredAndReported() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let body = Array("hello, drop".utf8)
    let reply = try await session.upload("notes/hello.txt", body)
    #expect(reply.status == 201)
    #expect(reply.json?["path"] as? String == "notes/hello.txt")
    #expect(session.stagedFiles() == ["notes/hello.txt": body])
    let received = await session.server.receivedFiles
    #expect(received.map(\.relativePath) == ["notes/hello.txt"])
    #expect(received.first?.size == body.count)
    let events = try await session.log.wait {
      $0.contains { if case .uploadFinished = $0 { true } else { false } }
    }
    let uploadEvents = events.filter(\.isUploadEvent)
    #expect(uploadEvents.count == 2)
    guard case .uploadStarted(let upload) = uploadEvents[0],
      case .uploadFinished(let file) = uploadEvents[1]
    else {
      Issue.record("unexpected events \(uploadEvents)")
      return
    }
    #expect(upload.relativePath == "notes/hello.txt" && upload.size == body.count)
    #expect(file.url.path == session.server.sessionFolder.appending(path: "notes/hello.txt").path)
  }

  @Test func emptyFileIsStored() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let reply = try await session.upload("empty.txt", [])
    #expect(reply.status == 201)
    #expect(session.stagedFiles() == ["empty.txt": []])
  }

  @Test func hundredMebibyteUploadArrivesByteIdentical() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let count = 100
    var expected = Data(capacity: count << 20)
    let chunk = TestBytes.make(1 << 20, seed: 7)
    let client = try await session.client()
    try await client.send(
      Requests.uploadHead(port: session.port, encodedPath: "big.bin", length: chunk.count * count))
    for index in 0..<count {
      var piece = chunk
      piece[index] = UInt8(truncatingIfNeeded: index)
      expected.append(contentsOf: piece)
      try await client.send(piece)
    }
    let reply = try await client.readReply()
    #expect(reply.status == 201)
    let stored = try Data(contentsOf: session.server.sessionFolder.appending(path: "big.bin"))
    #expect(stored.count == expected.count)
    #expect(stored == expected)
    #expect(session.incomingEntries().isEmpty)
  }

  /// Records share the session folder's URL and build their own on demand: the URL names the
  /// stored file, and a record made with the public initializer from the same values is equal.
  @Test func receivedFileRecordsNameTheirFiles() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    #expect(try await session.upload("a/b c.txt", Array("abc".utf8)).status == 201)
    let file = try #require(await session.server.receivedFiles.first)
    let expected = session.server.sessionFolder.appending(
      path: "a/b c.txt", directoryHint: .notDirectory)
    #expect(file.url == expected)
    #expect(try Data(contentsOf: file.url) == Data("abc".utf8))
    let copy = ReceivedFile(
      relativePath: file.relativePath, size: file.size, url: expected,
      receivedAt: file.receivedAt, mimeType: file.mimeType, kind: file.kind)
    #expect(copy == file)
    #expect(Set([copy, file]).count == 1)
  }

  @Test func unicodeNamesAreStoredInNFC() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let decomposed = "Cafe\u{301}/Ma\u{308}rchen ü 日本語 📚.txt"
    let reply = try await session.upload(decomposed, Array("x".utf8))
    #expect(reply.status == 201)
    let nfc = decomposed.precomposedStringWithCanonicalMapping
    #expect(reply.json?["path"] as? String == nfc)
    #expect(session.stagedFiles().keys.sorted() == [nfc])
  }

  @Test func sameExactPathReplacesTheEarlierFile() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    #expect(try await session.upload("a/b.txt", Array("one".utf8)).status == 201)
    #expect(try await session.upload("a/b.txt", Array("two".utf8)).status == 201)
    #expect(session.stagedFiles() == ["a/b.txt": Array("two".utf8)])
    #expect(await session.server.receivedFiles.count == 1)
  }

  /// A retry replaces the earlier file in one step: a reader that reads the file whole, again
  /// and again, while the retry arrives and is stored, only ever sees the old bytes or the new
  /// ones, never a mix or a short file.
  @Test func aRetryReplacesTheFileAtomically() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let old = Data(TestBytes.make(2 << 20, seed: 1))
    let new = Data(TestBytes.make(2 << 20, seed: 2))
    #expect(try await session.upload("book/a.bin", Array(old)).status == 201)
    let path = session.server.sessionFolder.appending(path: "book/a.bin").path

    let tally = ReaderTally()
    let reader = Task {
      await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
        // Its own thread: reading in a loop must not hold a thread of the cooperative pool.
        Thread.detachNewThread {
          while !tally.stop.load(ordering: .relaxed) {
            let bytes = FileManager.default.contents(atPath: path)
            if bytes == old {
              tally.old.add(1, ordering: .relaxed)
            } else if bytes == new {
              tally.new.add(1, ordering: .relaxed)
            } else {
              tally.torn.add(1, ordering: .relaxed)
            }
          }
          done.resume()
        }
      }
    }
    let client = try await session.client()
    try await client.send(
      Requests.uploadHead(port: session.port, encodedPath: "book/a.bin", length: new.count))
    try await client.send(Array(new.prefix(new.count / 2)))
    try await session.log.wait {
      $0.filter { if case .uploadStarted = $0 { true } else { false } }.count == 2
    }
    // Half the retry has arrived: the file is still the old one, whole.
    #expect(FileManager.default.contents(atPath: path) == old)
    try await client.send(Array(new.suffix(from: new.count / 2)))
    #expect(try await client.readReply().status == 201)
    tally.stop.store(true, ordering: .relaxed)
    await reader.value
    #expect(tally.torn.load(ordering: .relaxed) == 0)
    #expect(tally.old.load(ordering: .relaxed) > 0)
    #expect(FileManager.default.contents(atPath: path) == new)
    #expect(await session.server.receivedFiles.map(\.relativePath) == ["book/a.bin"])
  }

  final class ReaderTally: Sendable {
    let stop = Atomic(false)
    let old = Atomic(0)
    let new = Atomic(0)
    let torn = Atomic(0)
  }

  @Test func plusInThePathStaysAPlus() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let reply = try await session.upload(encodedPath: "c++%20notes.txt", Array("x".utf8))
    #expect(reply.status == 201)
    #expect(session.stagedFiles().keys.sorted() == ["c++ notes.txt"])
  }

  @Test func expectContinueIsAnsweredBeforeTheBody() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let client = try await session.client()
    try await client.send(
      Requests.uploadHead(
        port: session.port, encodedPath: "c.txt", length: 3, extra: ["Expect: 100-continue"]))
    let interim = try await client.readReply()
    #expect(interim.status == 100)
    try await client.send("abc")
    let final = try await client.readReply()
    #expect(final.status == 201)
    #expect(session.stagedFiles() == ["c.txt": Array("abc".utf8)])
  }

  @Test func eventsReadOnTheConnectionExecutorArriveInOrderOnTheEventLoop() async throws {
    let root = FileManager.default.temporaryDirectory.appending(
      path: "bd-test-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: root) }
    var configuration = BrowserDropServer.Configuration()
    configuration.port = 0
    configuration.bindAddress = "127.0.0.1"
    configuration.stagingRoot = root
    configuration.reservedFreeSpace = 0
    let server = BrowserDropServer(configuration: configuration)
    let reader = Task(executorPreference: server.connectionExecutor) {
      var seen: [(thread: String, event: Event)] = []
      for await event in server.events where event.isUploadEvent {
        seen.append((Self.currentThreadName(), event))
      }
      return seen
    }
    let port = try await server.start()[0].port
    let names = (0..<40).map { "set/\($0).txt" }
    for name in names {
      let client = try await RawClient.connect(port: port)
      try await client.send(
        Requests.uploadHead(port: port, encodedPath: Requests.encode(name), length: 2) + "ok")
      #expect(try await client.readReply().status == 201)
    }
    _ = try await server.finish()  // ends the stream, so the reader returns
    let seen = await reader.value
    let expected = names.flatMap { ["started \($0)", "finished \($0)"] }
    #expect(
      seen.map {
        switch $0.event {
        case .uploadStarted(let upload): "started \(upload.relativePath)"
        case .uploadFinished(let file): "finished \(file.relativePath)"
        default: "\($0.event)"
        }
      } == expected)
    // Handled on the loop's own thread, not on a thread of the cooperative pool.
    #expect(Set(seen.map(\.thread)) == ["bd-epoll"])
  }

  private static func currentThreadName() -> String {
    let comm = try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)
    return comm?.trimmingCharacters(in: .newlines) ?? "?"
  }
}

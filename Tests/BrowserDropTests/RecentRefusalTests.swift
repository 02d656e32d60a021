import BrowserDropTestSupport
import Foundation
import Testing

@testable import BrowserDrop

/// A request naming an upload id that is refused before its body is read: the id's next `HEAD`
/// tells the refusal once (`Upload-Refusal`), for a browser that read no answer (Firefox and
/// WebKit see a large body's early refusal as a dropped connection).
@Suite("A refusal before the body, told to the upload's next HEAD")
struct RecentRefusalTests {
  @Test func aPostRefusedForSpaceIsToldOnceToItsOwnPath() async throws {
    let session = try await ResumeTests.start { $0.reservedFreeSpace = Int.max / 2 }
    defer { Task { await session.stop() } }
    let client = ResumeClient(port: session.port, path: "video.bin", id: ResumeClient.randomID())
    let refused = try await client.exchange(client.postHead(length: 64 << 20), [])
    #expect(refused.status == 507 && refused.errorCode == "insufficient_storage")

    let otherPath = try await client.head(path: "other.bin")
    #expect(otherPath.status == 404)
    #expect(otherPath.headers["upload-refusal"] == nil, "another path's upload")
    let head = try await client.head()
    #expect(head.status == 404, "nothing of it on the device")
    #expect(head.headers["upload-refusal"] == "insufficient_storage")
    #expect(try await client.head().headers["upload-refusal"] == nil, "told once")
  }

  @Test func refusalsAboutTheUploadsStandingAreNotKept() throws {
    var refusals = RecentRefusals()
    let id = try UploadID(validating: "AAAAAAAAAAAAAAAAAAAAAA")
    let path = try UploadPath(validating: "a.bin")
    refusals.record(id, path: path, error: .offsetMismatch)
    #expect(refusals.take(id, path: path) == nil, "HEAD itself says where it stands")
    refusals.record(id, path: path, error: .pathConflict)
    #expect(refusals.take(id, path: path) == .pathConflict)
  }

  @Test func theOldestAreForgottenPastTheCapacity() throws {
    var refusals = RecentRefusals()
    let path = try UploadPath(validating: "a.bin")
    let ids = try (0...RecentRefusals.capacity).map {
      try UploadID(validating: Substring(String(format: "%032x", $0)))
    }
    for id in ids { refusals.record(id, path: path, error: .pathConflict) }
    #expect(refusals.count == RecentRefusals.capacity)
    #expect(refusals.take(ids[0], path: path) == nil)
    #expect(refusals.take(ids[1], path: path) == .pathConflict)
    #expect(refusals.take(ids.last!, path: path) == .pathConflict)
  }

  /// A client refused and asking HEAD in a loop keeps one entry, never a growing list.
  @Test func refusedAndToldInALoopStaysOneEntry() throws {
    var refusals = RecentRefusals()
    let id = try UploadID(validating: "AAAAAAAAAAAAAAAAAAAAAA")
    let path = try UploadPath(validating: "a.bin")
    for _ in 0..<10_000 {
      refusals.record(id, path: path, error: .insufficientStorage)
      refusals.record(id, path: path, error: .pathConflict)
      #expect(refusals.count == 1)
      #expect(refusals.take(id, path: path) == .pathConflict)
    }
    #expect(refusals.count == 0)
  }

  /// A later request of the id that is admitted makes the refusal old news: HEAD says nothing.
  @Test func aLaterAdmittedRequestOfTheIdForgetsIt() async throws {
    let session = try await ResumeTests.start()
    defer { Task { await session.stop() } }
    let body = TestBytes.make(1000)
    // A file `a`, then `a/x.bin`: the name is taken as a file, refused at admission.
    let first = ResumeClient(port: session.port, path: "a", id: ResumeClient.randomID())
    #expect(try await first.exchange(first.postHead(length: body.count), body[...]).status == 201)
    let client = ResumeClient(port: session.port, path: "a/x.bin", id: ResumeClient.randomID())
    let conflict = try await client.exchange(client.postHead(length: body.count), body[...])
    #expect(
      conflict.status == 409 && conflict.errorCode == "path_conflict",
      "\(conflict.status) \(conflict.text)")
    let elsewhere = ResumeClient(port: session.port, path: "b.bin", id: client.id)
    #expect(
      try await elsewhere.exchange(elsewhere.postHead(length: body.count), body[...]).status == 201)
    #expect(try await client.head().headers["upload-refusal"] == nil)
  }
}

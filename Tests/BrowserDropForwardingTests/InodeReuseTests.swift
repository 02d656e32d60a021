import BrowserDropTestSupport
import Foundation
import Testing

@testable import BrowserDropForwarding

/// A reused inode number is no proof of ownership. Kiosk 1's attempt fails after its
/// `installing` record (as a lost claim answer ends it) and removes its temporary file; the
/// server then gives that inode number to kiosk 2's same-sized file, which arrives at the same
/// name (smbd 4.17 was seen reusing one this way). The test stands in for the server's reuse by
/// writing kiosk 2's id into kiosk 1's records. Kiosk 1's resume must neither take kiosk 2's
/// file for its delivery (`.size`: its own content would be lost with the source folder) nor
/// remove it (`.sha256`: the digest differs): the share ends with both.
@Suite("An inode number reused after an attempt removed its temporary file")
struct InodeReuseTests {
  @Test(
    "The resume neither accepts nor removes another writer's file carrying the reused id",
    arguments: CrashResumeTests.Place.allCases, [Verification.size, .sha256])
  func reusedIDIsNotOwnership(place: CrashResumeTests.Place, verify: Verification) async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let (destination, folder) = try CrashResumeTests.destination(place, scratch)
    let mine = Data("kiosk one's".utf8)
    let theirs = Data("kiosk two's".utf8)
    try #require(mine.count == theirs.count)
    let batch = try scratch.folder("batch", ["x.txt": mine])
    await #expect(throws: ForwardFailure.self) {
      _ = try await Forwarder.stopping(at: .installFails).forward(folder: batch, to: destination)
    }
    #expect(try contents(of: folder).isEmpty, "the temporary file is removed")

    // Kiosk 2's file arrives at the name, with the inode number kiosk 1's upload had.
    try theirs.write(to: folder.appendingPathComponent("x.txt"))
    let backend = try #require(destination as? any DestinationBackend)
    let fileSystem = try await backend.open()
    let reused = try #require(try await fileSystem.fileID(at: ["x.txt"]))
    await fileSystem.close()
    let manifest = batch.appendingPathComponent(Manifest.fileName)
    let records = try String(contentsOf: manifest, encoding: .utf8)
    // Often the same already: the file system gave kiosk 2's file the freed inode number.
    let rewritten = records.replacing(/"fileID":\d+/, with: "\"fileID\":\(reused.id)")
    try rewritten.write(to: manifest, atomically: false, encoding: .utf8)

    let report = try await Forwarder().forward(folder: batch, to: destination, verify: verify)
    let found = try contents(of: folder)
    #expect(found == ["x.txt": theirs, "x 2.txt": mine], "\(found.keys.sorted())")
    #expect(report.files.map(\.destination) == ["x 2.txt"])
    #expect(report.resumedFiles == 0)
  }
}

import BrowserDrop
import BrowserDropTestSupport
import Foundation
import Testing

/// The staging layout the library exposes for the command (`StagingLayout`), against what the
/// library itself removes as leftovers.
@Suite("Staging layout")
struct StagingLayoutTests {
  @Test("The session folders listed are the library's, which removeLeftovers removes")
  func sessionFolders() throws {
    let folder = try TemporaryFolder()
    let root = folder.path("staging")
    let names = [
      "session-b", "session-a", ".session-a.incoming", "outbox", "received 2025-03-14 09.26.53",
    ]
    for name in names {
      try FileManager.default.createDirectory(
        at: root.appending(path: name), withIntermediateDirectories: true)
    }
    #expect(StagingLayout.sessionPrefix == "session-")
    #expect(
      try StagingLayout.sessionFolderNames(in: root) == ["session-a", "session-b"])
    #expect(!StagingLayout.isSessionFolder(".session-a.incoming"))
    BrowserDropServer.removeLeftovers(stagingRoot: root)
    #expect(try StagingLayout.sessionFolderNames(in: root).isEmpty)
    let left = try FileManager.default.contentsOfDirectory(atPath: root.path).sorted()
    #expect(left == ["outbox", "received 2025-03-14 09.26.53"])
    #expect(throws: (any Error).self) {
      try StagingLayout.sessionFolderNames(in: folder.path("missing"))
    }
  }
}

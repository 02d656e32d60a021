import BrowserDropTestSupport
import Foundation
import Testing

@testable import BrowserDrop

/// Every input a fuzz target (Fuzz/, scripts/fuzz.sh) found that broke an invariant, kept so it
/// can never come back. The crashing inputs are also in Fuzz/corpus/<target>/crash-*.
@Suite("Fuzz regressions")
struct FuzzRegressionTests {
  /// FuzzHostPolicy, first minutes: `inet_pton` reads a C string, so a Host of `127.0.0.1` + NUL
  /// + anything passed as the IP literal. Unreachable over HTTP (the head parser refuses control
  /// characters) but the policy must stand on its own.
  @Test(arguments: [
    "127.0.0.1\0\0\0\00", "127.0.0.1\0.evil.com", "[::1\0evil.com]", "10.0.0.1\0:80",
    "kiosk\0.evil.com", "127.0.0.1 ", "127.0.0.1\t", "évil", "kiosk.local/", "user@kiosk.local",
  ])
  func hostsWithBytesOutsideANameAreRefused(host: String) {
    #expect(!HostPolicy.isAllowed(host: host))
  }

  /// FuzzRequestHead, in a CI run: a header value starting with a space followed by a combining
  /// mark (U+07EB). Optional white space is trimmed as SP/HTAB bytes, so the value keeps the
  /// mark and loses the space; the fuzz target's own oracle trimmed Characters and disagreed.
  @Test func whiteSpaceBeforeACombiningMarkIsTrimmedAsBytes() throws {
    let raw: [UInt8] =
      Array("POST /u HTTP/1.1\r\nHost: ".utf8) + [0xDF, 0xAB] + Array("x.local\r\n\r\n".utf8)
    let head = try raw.withUnsafeBytes { try RequestHead.parse($0) }
    #expect(head.host?.unicodeScalars.first == "\u{07EB}")
    #expect(head.host?.utf8.count == 2 + "x.local".utf8.count)
    #expect(!HostPolicy.isAllowed(host: head.host!))
  }

  @Test func plainHostsStillPass() {
    for host in ["127.0.0.1", "127.0.0.1:8080", "[::1]:80", "kiosk.local", "nas_1", "localhost."] {
      #expect(HostPolicy.isAllowed(host: host), "\(host)")
    }
  }
}

/// Paths whose dangerous byte hides inside a Character: a combining mark after `.` or `/`
/// makes one grapheme of them, so Character-wise `hasPrefix(".")` said no. Found while checking
/// FuzzUploadPath's first crash (a path starting with U+0732, which joined the slash before it).
@Suite("Fuzz regressions: bytes, not Characters")
struct ByteWiseChecksTests {
  @Test(arguments: [".\u{301}", "a/.\u{301}", ".\u{301}x/y.mp3", "a/.\u{20D7}b"])
  func aDotFollowedByACombiningMarkIsStillHidden(path: String) {
    #expect(throws: Refusal.self) { try UploadPath(validating: path) }
    let encoded = Requests.encode(path)
    #expect(throws: Refusal.self) { try UploadPath(query: Substring("path=" + encoded)) }
  }

  @Test func aPathMayStartWithACombiningMarkAndStaysInside() throws {
    let path = try UploadPath(validating: "\u{732}")
    #expect(Array(path.value.utf8) == [0xDC, 0xB2])
  }

  @Test func removingAFolderRemovesFilesWhoseNextNameStartsWithAMark() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    #expect(try await session.upload("a/\u{301}b.txt", Array("x".utf8)).status == 201)
    #expect(try await session.upload("a/c.txt", Array("y".utf8)).status == 201)
    let removed = await session.server.removeReceivedItem(at: "a")
    #expect(removed.count == 2)
    #expect(await session.server.receivedFiles.isEmpty)
    #expect(session.stagedFiles().isEmpty)
  }

  @Test func aCustomPageNeverServesASiblingThatIsOnlyCanonicallyEqual() async throws {
    let base = FileManager.default.temporaryDirectory.appending(path: "bd-nfc-\(UUID())")
    defer { try? FileManager.default.removeItem(at: base) }
    let page = base.appending(path: "caf\u{E9}")
    let sibling = base.appending(path: "cafe\u{301}")
    try FileManager.default.createDirectory(at: page, withIntermediateDirectories: true)
    try FileManager.default.createDirectory(at: sibling, withIntermediateDirectories: true)
    try Data("index".utf8).write(to: page.appending(path: "index.html"))
    try Data("secret".utf8).write(to: sibling.appending(path: "secret.txt"))
    try FileManager.default.createSymbolicLink(
      atPath: page.path + "/link.txt", withDestinationPath: sibling.path + "/secret.txt")
    let source = PageSource(.custom(directory: page))
    let response = await source.response(for: "/link.txt")
    #expect(!String(decoding: response, as: UTF8.self).contains("secret"))
    #expect(String(decoding: response, as: UTF8.self).hasPrefix("HTTP/1.1 404"))
  }
}

/// FuzzUploadPath, 60 s run: segments were split on Characters, and `/` followed by a combining
/// mark (or preceded by a prepend character such as U+0D4E) is not a `/` Character. That hid
/// `..` and empty segments from the rules, and gave one file on disk two names in the index.
@Suite("Fuzz regressions: slashes inside Characters")
struct SlashInsideACharacterTests {
  @Test(arguments: [
    "a/\u{D4E}/../x.txt", "\u{D4E}/..", "a//\u{301}", "a/\u{D4E}//b", "a/\u{D4E}/./b",
    "a/\u{D4E}/.hidden",
  ])
  func hiddenSegmentsAreStillRefused(path: String) {
    #expect(throws: Refusal.self) { try UploadPath(validating: path) }
  }

  @Test func segmentsAreTheBytesBetweenSlashes() throws {
    let path = try UploadPath(validating: "a/\u{301}b/c\u{D4E}/d.txt")
    #expect(
      path.segments.map { Array($0.utf8) } == [
        Array("a".utf8), Array("\u{301}b".utf8), Array("c\u{D4E}".utf8), Array("d.txt".utf8),
      ])
    #expect(path.folders.count == 3)
  }

  @Test func oneFileOnDiskHasOneNameInTheSession() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    #expect(try await session.upload("a/x.txt", Array("1".utf8)).status == 201)
    let reply = try await session.upload(
      encodedPath: "a%2F%E0%B5%8E%2F..%2Fx.txt", Array("2".utf8))
    #expect(reply.status == 400 && reply.errorCode == "invalid_path")
    #expect(await session.server.receivedFiles.count == 1)
    #expect(session.stagedFiles() == ["a/x.txt": Array("1".utf8)])
  }
}

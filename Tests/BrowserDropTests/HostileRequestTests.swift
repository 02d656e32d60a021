import BrowserDropTestSupport
import Foundation
import Glibc
import Testing

@testable import BrowserDrop

/// Hostile requests modelled on real bugs in other upload and file servers: traversal in every
/// encoding, sibling-prefix escapes, control characters, framing tricks, header floods and
/// planted symlinks. Only page-folder files are ever served; nothing is ever written outside
/// the session folder.
@Suite("Hostile requests")
struct HostileRequestTests {
  static let tokens = ["%", "25", "2e", "2f", ".", "/"]

  /// Every sequence of `tokens` of length 1…`length` (6 + 36 + 216 + 1296 for 4).
  static func permutations(upTo length: Int) -> [String] {
    var all: [String] = []
    var level = [""]
    for _ in 1...length {
      level = level.flatMap { prefix in tokens.map { prefix + $0 } }
      all += level
    }
    return all
  }

  /// A page folder `x/data` next to `x/database` (the sibling-prefix trap) with secrets around.
  struct Layout {
    let base: URL
    let page: URL
    let stagingRoot: URL
    let pageBodies: Set<String> = ["INDEX", "A-FILE", "B-FILE"]

    init() throws {
      base = FileManager.default.temporaryDirectory.appending(path: "bd-hostile-\(UUID())")
      let x = base.appending(path: "x")
      page = x.appending(path: "data")
      stagingRoot = base.appending(path: "staging")
      let manager = FileManager.default
      try manager.createDirectory(
        at: page.appending(path: "sub"), withIntermediateDirectories: true)
      try manager.createDirectory(
        at: x.appending(path: "database"), withIntermediateDirectories: true)
      try Data("INDEX".utf8).write(to: page.appending(path: "index.html"))
      try Data("A-FILE".utf8).write(to: page.appending(path: "a.txt"))
      try Data("B-FILE".utf8).write(to: page.appending(path: "sub/b.txt"))
      try Data("SECRET-SIBLING".utf8).write(to: x.appending(path: "database/secret.txt"))
      try Data("SECRET-PARENT".utf8).write(to: x.appending(path: "secret.txt"))
      try Data("SECRET-BASE".utf8).write(to: base.appending(path: "secret.txt"))
      try Data("SECRET-HIDDEN".utf8).write(to: page.appending(path: ".env"))
      // Symlinks inside the page folder that lead out of it.
      try manager.createSymbolicLink(
        atPath: page.path + "/db", withDestinationPath: "../database")
      try manager.createSymbolicLink(
        atPath: page.path + "/up.txt", withDestinationPath: "../secret.txt")
      try manager.createSymbolicLink(atPath: page.path + "/etc", withDestinationPath: "/etc")
    }

    /// Every entry under `base` except inside the session folder, with file contents.
    func snapshotOutsideSession(session: URL) -> [String: String] {
      var result: [String: String] = [:]
      guard let walker = FileManager.default.enumerator(atPath: base.path) else { return result }
      let sessionName = session.lastPathComponent
      while let relative = walker.nextObject() as? String {
        if relative == "staging/" + sessionName {
          walker.skipDescendants()
          continue
        }
        let full = base.path + "/" + relative
        var info = stat()
        guard lstat(full, &info) == 0 else { continue }
        if (info.st_mode & S_IFMT) == S_IFREG {
          result[relative] = (try? String(contentsOfFile: full, encoding: .utf8)) ?? "?"
        } else {
          result[relative] = "kind \(info.st_mode & S_IFMT)"
        }
      }
      return result
    }

    func remove() { try? FileManager.default.removeItem(at: base) }
  }

  static func start(_ layout: Layout) async throws -> TestSession {
    let session = try await TestSession.start {
      $0.page = .custom(directory: layout.page)
      $0.stagingRoot = layout.stagingRoot
    }
    return session
  }

  // MARK: - Traversal permutations

  @Test func pagePathsServeOnlyPageFiles() async throws {
    let layout = try Layout()
    defer { layout.remove() }
    let session = try await Self.start(layout)
    defer { Task { await session.stop() } }
    let suffixes = [
      "", "secret.txt", "database/secret.txt", "x/database/secret.txt", "etc/passwd",
      "a.txt", ".env",
    ]
    var targets: [String] = []
    for (index, sequence) in Self.permutations(upTo: 4).enumerated() {
      targets.append("/" + sequence + suffixes[index % suffixes.count])
    }
    for sequence in Self.permutations(upTo: 2) {
      for suffix in suffixes { targets.append("/" + sequence + suffix) }
    }
    targets += [
      "/db/secret.txt", "/up.txt", "/etc/passwd", "/%2e%2e/database/secret.txt",
      "/..%2fdatabase%2fsecret.txt", "/%252e%252e%252fsecret.txt", "/sub/..%2f..%2fsecret.txt",
      "/%c0%ae%c0%ae/secret.txt", "/..\\secret.txt", "/%5c..%5csecret.txt", "/C:\\secret.txt",
      "/.%2fa.txt", "/%2e%2fa.txt", "/sub/%2e%2e/a.txt", "/.env", "/%2eenv", "/a.txt%00.html",
      "/", "/a.txt", "/sub/b.txt", "/sub/", "/%61.txt", "/sub%2fb.txt",
    ]
    #expect(targets.count >= 1300)
    var served = 0
    for target in targets {
      let reply = try await session.get(target)
      if reply.status == 200 {
        served += 1
        #expect(layout.pageBodies.contains(reply.text), "\(target) served \(reply.text)")
      } else {
        #expect(reply.status == 404 || reply.status == 400, "\(target): \(reply.status)")
      }
      #expect(!reply.text.contains("SECRET") && !reply.text.contains("root:"), "\(target)")
    }
    // Some of them are honest ways to name page files (`/`, `/a.txt`, `//a.txt`…).
    #expect(served > 0)
  }

  @Test func uploadPathsNeverWriteOutsideTheSessionFolder() async throws {
    let layout = try Layout()
    defer { layout.remove() }
    let session = try await Self.start(layout)
    defer { Task { await session.stop() } }
    let before = layout.snapshotOutsideSession(session: session.server.sessionFolder)
    let suffixes = ["", "x.txt", "etc/passwd", "database/evil.txt", "secret.txt"]
    var queries: [String] = []
    for (index, sequence) in Self.permutations(upTo: 4).enumerated() {
      queries.append("path=" + sequence + suffixes[index % suffixes.count])
    }
    queries += [
      "path=%252e%252e%252fevil.txt", "path=%25252e%25252e%25252fevil.txt", "path=..%252fevil",
      "path=%2e%2e%2fevil.txt", "path=%2E%2E%2Fevil.txt", "path=%c0%ae%c0%ae%2fevil.txt",
      "path=C:%5Cevil.txt", "path=C%3A%5CWindows%5Cevil.txt", "path=%5C..%5Cevil.txt",
      "path=..%5C..%5Cevil.txt", "path=\\..\\evil.txt", "path=C:\\evil.txt",
      "path=", "path", "path=&path=", "", "path=%20", "path=..%2F..%2Fx%2Fdatabase%2Fevil.txt",
      "path=..%2Fstaging-evil.txt", "path=%2Fetc%2Fevil.txt", "path=%2F%2Fevil.txt",
    ]
    #expect(queries.count >= 1300)
    let body = Array("hostile".utf8)
    var stored = 0
    for query in queries {
      let host = "127.0.0.1:\(session.port)"
      let reply = try await session.exchange(
        "POST /upload?\(query) HTTP/1.1\r\nHost: \(host)\r\nContent-Length: \(body.count)\r\n\r\n"
          + "hostile")
      if reply.status == 201 {
        stored += 1
        let path = try #require(reply.json?["path"] as? String, "\(query)")
        let valid = try UploadPath(validating: path)
        let file = session.server.sessionFolder.appending(path: valid.value).path
        #expect(FileManager.default.contents(atPath: file).map(Array.init) == body, "\(query)")
      } else {
        #expect([400, 409].contains(reply.status), "\(query): \(reply.status)")
      }
      #expect(
        layout.snapshotOutsideSession(session: session.server.sessionFolder) == before,
        "\(query) changed something outside the session folder")
    }
    // Decoded once, `%252e%252e%252f` is the harmless name `%2e%2e%2f`: some are stored.
    #expect(stored > 0)
    #expect(session.incomingEntries().isEmpty)
  }

  // MARK: - Names and headers

  @Test func controlAndBidiCharactersInNamesAreRefused() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let names = [
      "a%00b.txt", "a%0D%0Ab.txt", "a%0Ab.txt", "a%0Db.txt", "a%09b.txt", "a%1Bb.txt",
      "a%7Fb.txt", "a%C2%85b.txt", "evil%E2%80%AEtxt.exe", "a%E2%80%AAb", "a%E2%80%ABb",
      "a%E2%80%ACb", "a%E2%80%ADb", "a%E2%81%A6b", "a%E2%81%A7b", "a%E2%81%A8b", "a%E2%81%A9b",
      "a%E2%80%8Eb", "a%E2%80%8Fb", "a%D8%9Cb", "a%E2%80%8Bb", "a%EF%BB%BFb",
    ]
    for name in names {
      let reply = try await session.upload(encodedPath: name, Array("x".utf8))
      #expect(reply.status == 400 && reply.errorCode == "invalid_path", "\(name)")
    }
    #expect(session.stagedFiles().isEmpty)
  }

  @Test func controlCharactersInHeadersAreRefused() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let host = "127.0.0.1:\(session.port)"
    let heads = [
      "GET / HTTP/1.1\r\nHost: \(host)\r\nX: a\0b\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: \(host)\0evil.com\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: \(host)\r\nX: a\rb\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: \(host)\r\nX: a\nb\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: \(host)\nX: b\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: \(host)\r\nX\0: b\r\n\r\n",
      "GET /\0 HTTP/1.1\r\nHost: \(host)\r\n\r\n",
      "GET /a\rb HTTP/1.1\r\nHost: \(host)\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: \(host)\r\nX: \u{1B}[31m\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: \(host)\r\n\tfolded\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: \(host)\r\nX: 1\r\n folded\r\n\r\n",
      "GET / HTTP/1.1\r\n Host: \(host)\r\n\r\n",
      "GET / HTTP/1.1\nHost: \(host)\n\n",
      "GET / HTTP/1.1\r\nHost: \(host)\n\n",
      "GET / HTTP/1.1\nHost: \(host)\r\n\r\n",
    ]
    for head in heads {
      let reply = try await session.exchange(head)
      #expect([400, 403].contains(reply.status), "\(head.debugDescription): \(reply.status)")
    }
    // Bidi controls in a Host value are not a private name: forbidden, and no upload.
    let bidiHost = try await session.exchange(
      "GET / HTTP/1.1\r\nHost: 127.0.0.1\u{202E}moc.live\r\n\r\n")
    #expect(bidiHost.status == 403)
    #expect(session.stagedFiles().isEmpty)
  }

  @Test func htmlInNamesIsStoredAsAPlainNameAndEscapedInJSON() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let names = [
      "<img src=x onerror=alert(1)>.txt", "<script>alert(\"x\")</script>.txt",
      "a\"b'c&d.txt", "</title><b>bold</b>.txt", "{\"path\":\"evil\"}.txt",
    ]
    for name in names {
      let reply = try await session.upload(name, Array("x".utf8))
      #expect(reply.status == 201, "\(name)")
      #expect(reply.json?["path"] as? String == name, "\(name): \(reply.text)")
      #expect(reply.headers["content-type"]?.hasPrefix("application/json") == true)
    }
    #expect(Set(session.stagedFiles().keys) == Set(names))
  }

  // MARK: - Framing

  @Test func contentLengthTricksAreRefused() async throws {
    let session = try await TestSession.start { $0.maximumFileSize = 1 << 30 }
    defer { Task { await session.stop() } }
    let host = "127.0.0.1:\(session.port)"
    func head(_ lines: String) -> String {
      "POST /upload?path=cl.txt HTTP/1.1\r\nHost: \(host)\r\n\(lines)\r\n"
    }
    let badRequests = [
      "Content-Length: 1\r\nContent-Length: 1\r\n", "Content-Length: 1\r\nContent-Length: 2\r\n",
      "Content-Length: 1\r\ncontent-length: 1\r\n", "Content-Length: -1\r\n",
      "Content-Length: -0\r\n", "Content-Length: +1\r\n", "Content-Length: 1.0\r\n",
      "Content-Length: 0x10\r\n", "Content-Length: 1 2\r\n", "Content-Length: 1,1\r\n",
      "Content-Length: abc\r\n", "Content-Length:\r\n", "Content-Length: \r\n",
      "Content-Length: ١\r\n",
      "Content-Length: 1\r\nTransfer-Encoding: chunked\r\n",
    ]
    for lines in badRequests {
      let reply = try await session.exchange(head(lines) + "x")
      #expect(reply.status == 400, "\(lines.debugDescription): \(reply.status)")
    }
    // Huge but well-formed, however many digits (past what an Int holds too): refused by size
    // before any body, never a crash, an overflow or an allocation.
    for digits in Self.hugeLengths {
      let huge = try await session.exchange(head("Content-Length: \(digits)\r\n"))
      #expect(huge.status == 413, "\(digits): \(huge.status)")
      #expect(huge.errorCode == "too_large", "\(digits)")
    }
    // Leading zeros make no number invalid.
    let padded = try await session.exchange(head("Content-Length: 00000000000000000001\r\n") + "x")
    #expect(padded.status == 201, "\(padded.status) \(padded.text)")
    #expect(session.stagedFiles()["cl.txt"] == Array("x".utf8))
    let chunked = try await session.exchange(head("Transfer-Encoding: chunked\r\n"))
    #expect(chunked.status == 411)
    #expect(session.stagedFiles().count == 1)
  }

  static let hugeLengths = [
    "999999999999999999", "1000000000000000000", "9223372036854775807", "9223372036854775808",
    "99999999999999999999", "18446744073709551617", "0009223372036854775807",
  ]

  /// With no size limit, a length no volume can hold is weighed against the free space (507),
  /// the reserve included, without overflowing: even with a reserve of `Int.max`.
  @Test(arguments: [0, Int.max])
  func hugeLengthsWithoutALimitAreInsufficientStorage(reserve: Int) async throws {
    let session = try await TestSession.start { $0.reservedFreeSpace = reserve }
    defer { Task { await session.stop() } }
    let host = "127.0.0.1:\(session.port)"
    for digits in Self.hugeLengths {
      let reply = try await session.exchange(
        "POST /upload?path=big.bin HTTP/1.1\r\nHost: \(host)\r\nContent-Length: \(digits)\r\n\r\n")
      #expect(reply.status == 507, "\(digits): \(reply.status)")
      #expect(reply.errorCode == "insufficient_storage", "\(digits)")
    }
    #expect(session.stagedFiles().isEmpty)
    #expect(await session.log.events.isEmpty)
  }

  @Test func tenThousandTinyHeadersAreRefusedQuickly() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let host = "127.0.0.1:\(session.port)"
    for header in ["X: a\r\n", "a:\r\n", "Host: \(host)\r\n"] {
      let client = try await session.client()
      let request =
        "GET / HTTP/1.1\r\nHost: \(host)\r\n" + String(repeating: header, count: 10_000) + "\r\n"
      try? await client.send(request)
      let reply = try await client.readReply()
      #expect([400, 431].contains(reply.status), "\(header.debugDescription): \(reply.status)")
    }
    // Many tiny headers that fit in 16 KiB are read and answered normally.
    let fits = try await session.exchange(
      "GET /config.json HTTP/1.1\r\nHost: \(host)\r\n" + String(repeating: "a:\r\n", count: 3_000)
        + "\r\n")
    #expect(fits.status == 200)
    #expect(try await session.get("/config.json").status == 200)
  }

  // MARK: - Planted symlinks

  @Test func aFolderReplacedByASymlinkIsNeverFollowed() async throws {
    let layout = try Layout()
    defer { layout.remove() }
    let elsewhere = layout.base.appending(path: "elsewhere")
    try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
    let session = try await Self.start(layout)
    defer { Task { await session.stop() } }
    let folder = session.server.sessionFolder
    // Planted before the upload: `Book` → elsewhere.
    try FileManager.default.createSymbolicLink(
      atPath: folder.path + "/Book", withDestinationPath: elsewhere.path)
    let first = try await session.upload("Book/ch1.mp3", Array("one".utf8))
    #expect(first.status == 500 && first.errorCode == "write_failed")
    // Planted deeper, and as the file itself (rename replaces the link, never writes through).
    try FileManager.default.createDirectory(
      at: folder.appending(path: "Real"), withIntermediateDirectories: true)
    try FileManager.default.createSymbolicLink(
      atPath: folder.path + "/Real/Inner", withDestinationPath: elsewhere.path)
    let second = try await session.upload("Real/Inner/ch2.mp3", Array("two".utf8))
    #expect(second.status == 500)
    try Data("KEEP".utf8).write(to: elsewhere.appending(path: "target.txt"))
    try FileManager.default.createSymbolicLink(
      atPath: folder.path + "/file.txt", withDestinationPath: elsewhere.path + "/target.txt")
    let third = try await session.upload("file.txt", Array("three".utf8))
    #expect(third.status == 201)
    var info = stat()
    #expect(lstat(folder.path + "/file.txt", &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG)
    #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere.path) == ["target.txt"])
    #expect(
      try String(contentsOf: elsewhere.appending(path: "target.txt"), encoding: .utf8) == "KEEP")
    #expect(session.incomingEntries().isEmpty)
  }

  @Test func aSymlinkPlantedWhileTheBodyArrivesIsNeverFollowed() async throws {
    let layout = try Layout()
    defer { layout.remove() }
    let elsewhere = layout.base.appending(path: "elsewhere")
    try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
    let session = try await Self.start(layout)
    defer { Task { await session.stop() } }
    let client = try await session.client()
    try await client.send(
      Requests.uploadHead(port: session.port, encodedPath: "Book/ch1.mp3", length: 6))
    try await client.send("abc")
    try await session.log.wait {
      $0.contains { if case .uploadStarted = $0 { true } else { false } }
    }
    try FileManager.default.createSymbolicLink(
      atPath: session.server.sessionFolder.path + "/Book", withDestinationPath: elsewhere.path)
    try await client.send("def")
    let reply = try await client.readReply()
    #expect(reply.status == 500)
    #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere.path).isEmpty)
    #expect(await session.server.receivedFiles.isEmpty)
  }

  @Test func removingAndCancellingNeverDeleteThroughASymlink() async throws {
    let layout = try Layout()
    defer { layout.remove() }
    let elsewhere = layout.base.appending(path: "elsewhere")
    try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
    try Data("KEEP".utf8).write(to: elsewhere.appending(path: "a.txt"))
    let session = try await Self.start(layout)
    #expect(try await session.upload("Book/a.txt", Array("x".utf8)).status == 201)
    #expect(try await session.upload("Disc/a.txt", Array("y".utf8)).status == 201)
    // Another process swaps the folders for links to a folder holding a file of the same name.
    let folder = session.server.sessionFolder.path
    for name in ["Book", "Disc"] {
      try FileManager.default.removeItem(atPath: folder + "/" + name)
      try FileManager.default.createSymbolicLink(
        atPath: folder + "/" + name, withDestinationPath: elsewhere.path)
    }
    await session.server.removeReceivedItem(at: "Book")
    #expect(FileManager.default.fileExists(atPath: elsewhere.path + "/a.txt"))
    await session.server.cancel()
    #expect(FileManager.default.fileExists(atPath: elsewhere.path + "/a.txt"))
    #expect(try String(contentsOf: elsewhere.appending(path: "a.txt"), encoding: .utf8) == "KEEP")
    await session.stop()
  }

  /// A link planted under the next partial name in the incoming folder is never written
  /// through: anonymous partial files have no name, and named ones are created with
  /// `O_EXCL | O_NOFOLLOW` (PartialFileTests covers that path directly).
  @Test func aSymlinkPlantedAsThePartialFileIsNeverFollowed() async throws {
    let layout = try Layout()
    defer { layout.remove() }
    let session = try await Self.start(layout)
    defer { Task { await session.stop() } }
    let victim = layout.base.appending(path: "victim.txt")
    try Data("KEEP".utf8).write(to: victim)
    let incoming = try #require(
      try FileManager.default.contentsOfDirectory(atPath: layout.stagingRoot.path).first {
        $0.hasSuffix(".incoming")
      })
    try FileManager.default.createSymbolicLink(
      atPath: layout.stagingRoot.path + "/" + incoming + "/.upload-1.partial",
      withDestinationPath: victim.path)
    _ = try await session.upload("p.txt", Array("OVERWRITTEN".utf8))
    let victimText = try String(contentsOf: victim, encoding: .utf8)
    #expect(victimText == "KEEP")
    var info = stat()
    #expect(lstat(session.server.sessionFolder.path + "/p.txt", &info) == 0)
    #expect((info.st_mode & S_IFMT) == S_IFREG)
    #expect(session.stagedFiles() == ["p.txt": Array("OVERWRITTEN".utf8)])
  }
}

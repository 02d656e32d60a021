import BrowserDropTestSupport
import Foundation
import Testing

@testable import BrowserDrop

@Suite("Serving the page and config.json")
struct PageServingTests {
  @Test func bundledPageIsServedWithAStrictPolicy() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let index = try await session.get("/")
    #expect(index.status == 200)
    #expect(index.headers["content-type"] == "text/html; charset=utf-8")
    #expect(index.headers["content-security-policy"]?.contains("script-src 'self'") == true)
    #expect(index.headers["x-content-type-options"] == "nosniff")
    #expect(index.body == PageSource.bundledFiles["index.html"])
    for (name, _) in PageSource.bundledFiles {
      let reply = try await session.get("/" + name)
      #expect(reply.status == 200, "\(name)")
      #expect(reply.body == PageSource.bundledFiles[name])
    }
    #expect(try await session.get("/index.html?cache=1").status == 200)
  }

  @Test func missingAndUnsafePageFilesAreNotFound() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    for target in [
      "/nope.js", "/../Package.swift", "/%2e%2e/Package.swift", "/.hidden", "/a/../index.html",
      "/upload",
    ] {
      let reply = try await session.get(target)
      #expect(reply.status == 404, "\(target)")
      #expect(reply.errorCode == "not_found")
    }
  }

  @Test func configJSONReflectsTheConfiguration() async throws {
    let session = try await TestSession.start {
      $0.allowedExtensions = ["MP3", "m4b", "M4A"]
      $0.maximumFileSize = 8_589_934_592
      $0.maximumConcurrentUploads = 5
      $0.pageSettings = PageSettings(
        title: "My App", language: "es", accentColor: "#FF8800",
        strings: ["title": "Subir archivos"])
    }
    defer { Task { await session.stop() } }
    let reply = try await session.get("/config.json")
    #expect(reply.status == 200)
    #expect(reply.headers["content-type"] == "application/json; charset=utf-8")
    let json = try #require(reply.json)
    #expect(json["protocolVersion"] as? Int == 1)
    #expect(json["title"] as? String == "My App")
    #expect(json["language"] as? String == "es")
    #expect(json["accentColor"] as? String == "#FF8800")
    #expect(json["allowedExtensions"] as? [String] == ["m4a", "m4b", "mp3"])
    #expect(json["maximumFileSize"] as? Int == 8_589_934_592)
    #expect(json["maximumConcurrentUploads"] as? Int == 5)
    #expect(json["strings"] as? [String: String] == ["title": "Subir archivos"])
  }

  @Test func unsetKeysAreAbsent() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let json = try #require(try await session.get("/config.json").json)
    #expect(Set(json.keys) == ["protocolVersion", "maximumConcurrentUploads"])
  }

  @Test func customPageIsServedAndNeverLeavesItsFolder() async throws {
    let base = FileManager.default.temporaryDirectory.appending(
      path: "bd-page-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: base) }
    let page = base.appending(path: "page")
    let sibling = base.appending(path: "page-secrets")
    try FileManager.default.createDirectory(
      at: page.appending(path: "css"), withIntermediateDirectories: true)
    try FileManager.default.createDirectory(at: sibling, withIntermediateDirectories: true)
    try Data("<h1>mine</h1>".utf8).write(to: page.appending(path: "index.html"))
    try Data("body{}".utf8).write(to: page.appending(path: "css/site.css"))
    try Data("secret".utf8).write(to: sibling.appending(path: "key.txt"))
    try Data("secret".utf8).write(to: base.appending(path: "outside.txt"))
    try FileManager.default.createSymbolicLink(
      atPath: page.appending(path: "escape.txt").path, withDestinationPath: "../outside.txt")
    try FileManager.default.createSymbolicLink(
      atPath: page.appending(path: "sib").path, withDestinationPath: "../page-secrets")
    try FileManager.default.createSymbolicLink(
      atPath: page.appending(path: "inside.css").path, withDestinationPath: "css/site.css")
    let session = try await TestSession.start {
      $0.page = .custom(directory: page, contentSecurityPolicy: "default-src 'none'")
    }
    defer { Task { await session.stop() } }
    let index = try await session.get("/")
    #expect(index.text == "<h1>mine</h1>")
    #expect(index.headers["content-security-policy"] == "default-src 'none'")
    let css = try await session.get("/css/site.css")
    #expect(css.status == 200 && css.headers["content-type"] == "text/css; charset=utf-8")
    #expect(try await session.get("/inside.css").status == 200)
    for target in ["/escape.txt", "/sib/key.txt", "/../page-secrets/key.txt", "/css", "/css/"] {
      #expect(try await session.get(target).status == 404, "\(target)")
    }
  }

  /// A build whose embedded page is missing (empty, or without `index.html`) answers every page
  /// request 500 `page_missing`; config.json and uploads still work.
  @Test(arguments: [[:], ["app.js": Array("x".utf8)]])
  func aMissingBundledPageIsPageMissing(bundle: [String: [UInt8]]) async throws {
    let session = try await TestSession.start(pageBundle: bundle)
    defer { Task { await session.stop() } }
    for target in ["/", "/index.html", "/app.js"] {
      let reply = try await session.get(target)
      #expect(reply.status == 500, "\(target)")
      #expect(reply.errorCode == "page_missing", "\(target)")
    }
    #expect(try await session.get("/config.json").status == 200)
    #expect(try await session.upload("a.txt", [1]).status == 201)
  }

  @Test func aCustomFolderWithoutIndexIsPageMissing() async throws {
    let empty = FileManager.default.temporaryDirectory.appending(
      path: "bd-empty-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: empty) }
    let session = try await TestSession.start { $0.page = .custom(directory: empty) }
    defer { Task { await session.stop() } }
    let reply = try await session.get("/")
    #expect(reply.status == 500)
    #expect(reply.errorCode == "page_missing")
  }
}

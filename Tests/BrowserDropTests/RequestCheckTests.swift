import BrowserDropTestSupport
import Foundation
import Testing

@testable import BrowserDrop

@Suite("Host, Origin and path rules")
struct RequestCheckTests {
  static let allowedHosts = [
    "127.0.0.1", "127.0.0.1:8080", "192.168.1.20", "[::1]", "[::1]:8080", "[fe80::1]", "localhost",
    "localhost:80", "kiosk", "KIOSK:8080", "nas.local", "box.lan", "pi.home", "pi.home.arpa",
    "svc.internal", "printer.local.", "a_b",
  ]
  static let refusedHosts = [
    "evil.com", "evil.com:80", "127.0.0.1.nip.io", "x.localhost.evil.com", "",
    "[::1", "::1", "192.168.1.20:99999", "host:abc", "a..b.local", "-bad.local", "x.lan.com",
    "ex ample.local",
  ]

  @Test(arguments: allowedHosts) func allowedHostNames(host: String) {
    #expect(HostPolicy.isAllowed(host: host))
  }

  @Test(arguments: refusedHosts) func refusedHostNames(host: String) {
    #expect(!HostPolicy.isAllowed(host: host))
  }

  @Test func originMustBeTheServersOwnPage() {
    #expect(HostPolicy.originMatches("http://127.0.0.1:8080", host: "127.0.0.1:8080"))
    #expect(HostPolicy.originMatches("http://NAS.local", host: "nas.local:80"))
    #expect(HostPolicy.originMatches("http://[::1]:9", host: "[::1]:9"))
    #expect(!HostPolicy.originMatches("http://127.0.0.1:8081", host: "127.0.0.1:8080"))
    #expect(!HostPolicy.originMatches("https://127.0.0.1:8080", host: "127.0.0.1:8080"))
    #expect(!HostPolicy.originMatches("null", host: "127.0.0.1:8080"))
    #expect(!HostPolicy.originMatches("http://evil.com", host: "127.0.0.1"))
    #expect(!HostPolicy.originMatches("http://127.0.0.1:8080/path", host: "127.0.0.1:8080"))
  }

  /// The last allowed Host and matching Origin are remembered; the answers must not change
  /// whatever came before them.
  @Test func rememberedAnswersNeverLeakToOtherValues() {
    for host in Self.allowedHosts + Self.refusedHosts + Self.allowedHosts {
      let expected = Self.allowedHosts.contains(host)
      #expect(HostPolicy.isAllowed(host: host) == expected, "\(host)")
      #expect(HostPolicy.isAllowed(host: host) == expected, "\(host), asked again")
    }
    for _ in 0..<2 {
      #expect(HostPolicy.originMatches("http://127.0.0.1:8080", host: "127.0.0.1:8080"))
      #expect(!HostPolicy.originMatches("http://127.0.0.1:8080", host: "127.0.0.1:8081"))
      #expect(!HostPolicy.originMatches("http://127.0.0.1:8081", host: "127.0.0.1:8080"))
    }
  }

  /// The 201 is assembled from constant halves; it must be exactly the generic JSON response.
  @Test(arguments: [
    "a.txt", "Photos/2024/IMG 0001.JPG", "say \"hi\".txt", "back\\slash", "Über/ß.txt",
  ])
  func createdResponseIsTheGenericJSONResponse(path: String) {
    let quoted = JSONText.quoted(path)
    #expect(Response.created(path: path) == Response.json(status: 201, "{\"path\":\(quoted)}"))
    let decoded = try? JSONDecoder().decode(
      [String: String].self, from: Data("{\"path\":\(quoted)}".utf8))
    #expect(decoded?["path"] == path)
  }

  @Test func foreignHostsAreForbiddenForGetAndPost() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let get = try await session.get("/", host: "evil.com")
    #expect(get.status == 403 && get.errorCode == "forbidden")
    let config = try await session.get("/config.json", host: "rebind.attacker.net:\(session.port)")
    #expect(config.status == 403)
    let post = try await session.exchange(
      Requests.uploadHead(port: session.port, encodedPath: "a.txt", length: 1, host: "evil.com")
        + "x")
    #expect(post.status == 403)
    #expect(session.stagedFiles().isEmpty)
  }

  @Test func crossSiteUploadsAreForbiddenAndMissingOriginIsAllowed() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let foreign = try await session.exchange(
      Requests.uploadHead(
        port: session.port, encodedPath: "a.txt", length: 1, origin: .some("http://evil.com")) + "x"
    )
    #expect(foreign.status == 403)
    let otherPort = try await session.exchange(
      Requests.uploadHead(
        port: session.port, encodedPath: "a.txt", length: 1, origin: .some("http://127.0.0.1:1"))
        + "x")
    #expect(otherPort.status == 403)
    let scripted = try await session.exchange(
      Requests.uploadHead(port: session.port, encodedPath: "a.txt", length: 1, origin: .some(nil))
        + "x")
    #expect(scripted.status == 201)
    // A GET needs no Origin check, even a foreign one.
    let page = try await session.exchange(
      "GET /config.json HTTP/1.1\r\nHost: 127.0.0.1:\(session.port)\r\nOrigin: http://evil.com\r\n\r\n"
    )
    #expect(page.status == 200)
  }

  static let unsafePaths: [String] = [
    "", "path=", "path=%2Fetc%2Fpasswd", "path=..%2Fx.txt", "path=a%2F..%2Fb.txt", "path=.",
    "path=..",
    "path=a%2F.%2Fb.txt", "path=.hidden", "path=a%2F.git%2Fconfig", "path=a%2F%2Fb.txt",
    "path=a%2F",
    "path=a%5Cb.txt", "path=C%3A%5Cwin.txt", "path=%5C..%5Cx.txt", "path=a%00b.txt",
    "path=a%0Ab.txt",
    "path=a%0Db.txt", "path=a%7Fb.txt", "path=evil%E2%80%AEtxt.exe", "path=zero%E2%80%8Bwidth.txt",
    "path=a%ZZ.txt", "path=a%2", "path=%C0%AE%C0%AE%2Fx", "path=%FF.txt", "path=a.txt&path=b.txt",
    "path=%252e%252e%252fx", "x=1",
    "path=" + String(repeating: "a", count: 256) + ".txt",
    "path="
      + Array(repeating: String(repeating: "d", count: 200), count: 6).joined(separator: "%2F"),
  ]

  @Test(arguments: unsafePaths) func unsafePathsAreInvalid(query: String) async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let host = "127.0.0.1:\(session.port)"
    let reply = try await session.exchange(
      "POST /upload?\(query) HTTP/1.1\r\nHost: \(host)\r\nOrigin: http://\(host)\r\nContent-Length: 1\r\n\r\nx"
    )
    if query == "path=%252e%252e%252fx" {
      // Decoded once, this is the harmless name "%2e%2e%2fx", stored as such.
      #expect(reply.status == 201)
      #expect(session.stagedFiles().keys.sorted() == ["%2e%2e%2fx"])
    } else {
      #expect(reply.status == 400, "\(query)")
      #expect(reply.errorCode == "invalid_path", "\(query)")
      #expect(session.stagedFiles().isEmpty)
    }
  }
}

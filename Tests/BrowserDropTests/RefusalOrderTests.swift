import BrowserDropTestSupport
import CBrowserDropLinux
import Foundation
import Testing

@testable import BrowserDrop

/// Protocol v1 decides refusals in one order, the first that applies answering: Host, framing
/// (431, 400, 411), method, Origin (uploads only), path, type, size, conflict, space. Every pair
/// of them is sent at once to the real server, and the earlier one must answer, before any body.
@Suite("The order refusals are decided in, pair by pair")
struct RefusalOrderTests {
  /// One reason to refuse, in protocol order.
  enum Check: Int, CaseIterable, Comparable, CustomStringConvertible {
    case host, headTooLarge, unreadable, noLength, method, origin, path, type, size, conflict,
      space

    static func < (lhs: Check, rhs: Check) -> Bool { lhs.rawValue < rhs.rawValue }

    var description: String { "\(self.status) \(self.code)" }

    var status: Int {
      switch self {
      case .host, .origin: 403
      case .headTooLarge: 431
      case .unreadable, .path, .type: 400
      case .noLength: 411
      case .method: 405
      case .size: 413
      case .conflict: 409
      case .space: 507
      }
    }

    var code: String {
      switch self {
      case .host, .origin: "forbidden"
      case .headTooLarge: "headers_too_large"
      case .unreadable: "bad_request"
      case .noLength: "length_required"
      case .method: "method_not_allowed"
      case .path: "invalid_path"
      case .type: "unsupported_type"
      case .size: "too_large"
      case .conflict: "path_conflict"
      case .space: "insufficient_storage"
      }
    }
  }

  static let gib = 1 << 30
  /// Over `maximumFileSize`.
  static let tooLarge = 64 * gib
  /// Within `maximumFileSize`, more than what the reservation leaves (see `start`).
  static let tooMuchForTheDisk = 16 * gib

  /// An upload request that breaks exactly the rules in `checks` and no other.
  static func request(breaking checks: Set<Check>, port: Int) -> String {
    let host = checks.contains(.host) ? "rebind.attacker.example" : "127.0.0.1:\(port)"
    // Origin matches the Host (even a foreign one) unless the Origin rule is the one broken.
    let origin = checks.contains(.origin) ? "http://attacker.example" : "http://\(host)"
    let target = checks.contains(.method) ? "/elsewhere" : "/upload"
    var name = checks.contains(.type) ? "a.exe" : "a.txt"
    if checks.contains(.conflict) { name = "taken.txt/" + name }
    if checks.contains(.path) { name = ".hidden/" + name }
    let length =
      checks.contains(.size)
      ? tooLarge : checks.contains(.space) ? tooMuchForTheDisk : 1
    var lines = [
      "POST \(target)?path=\(Requests.encode(name)) HTTP/1.1", "Host: \(host)",
      "Origin: \(origin)",
    ]
    if !checks.contains(.noLength) { lines.append("Content-Length: \(length)") }
    // No body is sent: an acceptable request is answered 100 and waits for it.
    lines.append("Expect: 100-continue")
    if checks.contains(.unreadable) { lines.append("Bad Name: a space in a header name") }
    if checks.contains(.headTooLarge) {
      lines += (0..<400).map { "X-Filler-\($0): \(String(repeating: "a", count: 40))" }
    }
    return lines.joined(separator: "\r\n") + "\r\n\r\n"
  }

  /// A session where every check can apply: only `.txt`, at most 32 GiB a file, and a
  /// reservation that leaves 8 GiB of what is free now (margins of gigabytes, so what other
  /// tests write meanwhile changes nothing). `taken.txt` is already there.
  static func start() async throws -> TestSession {
    var free: UInt64 = 0
    #expect(cbd_free_bytes(FileManager.default.temporaryDirectory.path, &free) == 0)
    let session = try await TestSession.start {
      $0.allowedExtensions = ["txt"]
      $0.maximumFileSize = 32 * gib
      $0.reservedFreeSpace = Int(free) - 8 * gib
    }
    #expect(try await session.upload("taken.txt", [1]).status == 201)
    return session
  }

  @Test func eachCheckAloneAnswersWithItsOwnCode() async throws {
    let session = try await Self.start()
    defer { Task { await session.stop() } }
    for check in Check.allCases {
      let reply = try await session.exchange(Self.request(breaking: [check], port: session.port))
      #expect(reply.status == check.status, "\(check)")
      #expect(reply.errorCode == check.code, "\(check): \(reply.text)")
    }
    // And with none broken, the same request is acceptable.
    let accepted = try await session.exchange(Self.request(breaking: [], port: session.port))
    #expect(accepted.status == 100)
  }

  @Test func ofEveryTwoTheEarlierAnswers() async throws {
    let session = try await Self.start()
    defer { Task { await session.stop() } }
    var pairs = 0
    for first in Check.allCases {
      for second in Check.allCases where first < second {
        // Without a Content-Length there is no size to weigh: 411 already answers alone.
        if first == .noLength && (second == .size || second == .space) { continue }
        let reply = try await session.exchange(
          Self.request(breaking: [first, second], port: session.port))
        #expect(reply.status == first.status, "\(first) before \(second): got \(reply.status)")
        #expect(reply.errorCode == first.code, "\(first) before \(second): \(reply.text)")
        pairs += 1
      }
    }
    #expect(pairs == 53)
    // Nothing was read as a body and no upload started: only `taken.txt`'s two events.
    #expect(await session.log.events.filter(\.isUploadEvent).count == 2)
    #expect(session.stagedFiles() == ["taken.txt": [1]])
  }

  /// A GET is checked for Host and framing too, but needs no Origin.
  @Test func aPageRequestIsCheckedForHostBeforeFraming() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let foreign = "Host: rebind.attacker.example"
    let padding = (0..<400).map { "X-Filler-\($0): \(String(repeating: "a", count: 40))\r\n" }
      .joined()
    for (request, expected) in [
      ("GET / HTTP/1.1\r\n\(foreign)\r\n\(padding)\r\n", 403),
      ("GET / HTTP/1.1\r\n\(foreign)\r\nBad Name: x\r\n\r\n", 403),
      ("GET / HTTP/1.1\r\n\(foreign)\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 403),
      ("BAD REQUEST LINE\r\n\(foreign)\r\n\r\n", 403),
      ("GET / HTTP/1.1\r\nHost: 127.0.0.1:\(session.port)\r\n\(padding)\r\n", 431),
      ("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Name: x\r\n\r\n", 400),
      ("GET / HTTP/1.1\r\nX: y\r\n\r\n", 400),  // no Host at all: unreadable
      ("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.com\r\n\r\n", 403),
      ("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: 127.0.0.1\r\n\r\n", 400),
    ] {
      let reply = try await session.exchange(request)
      #expect(reply.status == expected, "\(request.prefix(80).debugDescription)")
    }
  }
}

import Testing

@testable import BrowserDrop

/// `RequestPolicy` alone, without sockets: the heads RefusalOrderTests sends to the real server,
/// decided as a pure function. The checks the session decides (conflict, space) come after it,
/// so a head breaking only those is admitted here.
@Suite("The check order as a pure function")
struct RequestPolicyTests {
  typealias Check = RefusalOrderTests.Check

  static let policy = RequestPolicy(
    allowedExtensions: ["txt"], maximumFileSize: 32 * RefusalOrderTests.gib)
  static let sessionChecks: Set<Check> = [.conflict, .space]

  static func decide(_ request: String) -> RequestPolicy.Decision {
    var bytes = Array(request.utf8)
    return bytes.withUnsafeMutableBytes { raw in
      let all = UnsafeRawBufferPointer(raw)
      guard let end = RequestHead.end(in: all, scanFrom: 0) else {
        return .refuse(RequestPolicy.refusal(forUnfinishedHead: all))
      }
      return policy.decide(head: UnsafeRawBufferPointer(rebasing: all[..<end]))
    }
  }

  @Test func ofEveryTwoTheEarlierDecides() {
    for first in Check.allCases {
      for second in Check.allCases where first <= second {
        if first == .noLength && (second == .size || second == .space) { continue }
        let decision = Self.decide(
          RefusalOrderTests.request(breaking: [first, second], port: 8080))
        if Self.sessionChecks.contains(first) {
          guard case .admitUpload = decision else {
            Issue.record("\(first), \(second): \(decision)")
            continue
          }
        } else {
          guard case .refuse(let refusal) = decision else {
            Issue.record("\(first), \(second): \(decision)")
            continue
          }
          #expect(refusal.error.status == first.status, "\(first) before \(second)")
          #expect(refusal.error.rawValue == first.code, "\(first) before \(second)")
        }
      }
    }
  }

  @Test func pageAndConfigurationRequestsAreServed() {
    #expect(
      Self.decide("GET /a.js?v=2 HTTP/1.1\r\nHost: kiosk\r\n\r\n") == .servePage(path: "/a.js"))
    #expect(
      Self.decide("GET /config.json HTTP/1.1\r\nHost: 10.0.0.2:8080\r\n\r\n")
        == .serveConfiguration)
    #expect(
      Self.decide("GET / HTTP/1.1\r\nHost: kiosk\r\nTransfer-Encoding: chunked\r\n\r\n")
        == .refuse(Refusal(.lengthRequired)))
  }

  @Test func anUploadCarriesItsPathSizeAndExpectation() throws {
    let decision = Self.decide(
      "POST /upload?path=Book%2F01.txt HTTP/1.1\r\nHost: nas.local\r\nContent-Length: 12\r\n"
        + "Expect: 100-continue\r\n\r\n")
    #expect(
      decision
        == .admitUpload(
          RequestPolicy.UploadRequest(
            path: try UploadPath(validating: "Book/01.txt"), size: 12, expectsContinue: true)))
  }
}

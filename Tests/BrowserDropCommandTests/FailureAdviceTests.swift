import Foundation
import Testing

@testable import BrowserDropForwarding
@testable import browserdrop

/// The command's forwarding-failure sentences: the library's advice is written for an app
/// ("Choose Keep Both or Replace", "forward again"); the command says what its user can do.
@Suite("Forwarding failure advice")
struct FailureAdviceTests {
  static let kinds: [ForwardFailure.Kind] = [
    .connectionRefused, .timedOut, .unreachable, .wrongCredentials, .permissionDenied,
    .shareNotFound, .readOnly, .destinationFull, .connectionLost, .nameNotAllowed, .nameTaken,
    .verificationFailed, .sourceUnreadable, .invalidDestination, .smbUnavailable, .other,
  ]

  @Test("No sentence keeps advice the command can't follow", arguments: [false, true])
  func noAppAdvice(kiosk: Bool) {
    for kind in Self.kinds {
      for place in [
        ForwardFailure.Place.smb(host: "127.0.0.1", share: "drops", user: "anna"),
        .local(directory: "/srv/in"),
      ] {
        let failure = ForwardFailure(kind: kind, place: place, item: "scan.pdf", errno: EIO)
        let message = ForwardRun.message(for: failure, kiosk: kiosk)
        for phrase in ["Keep Both", "forward again", "Forward again", "try again", "Try again"] {
          #expect(!message.contains(phrase), "\(kind) (kiosk \(kiosk)): \(message)")
        }
        // What happened is still said the library's way.
        let fact = failure.description.prefix { $0 != "." && $0 != "—" }
        #expect(message.hasPrefix(fact), "\(message)")
      }
    }
  }

  @Test("--on-conflict fail names the flags that would have let it through")
  func nameTaken() {
    let failure = ForwardFailure(
      kind: .nameTaken, place: .local(directory: "/srv/in"), item: "report.pdf")
    #expect(
      ForwardRun.message(for: failure, kiosk: false)
        == "“report.pdf” already exists in the folder /srv/in. "
        + "Use --on-conflict rename or replace, or move the existing item away.")
    #expect(ForwardRun.message(for: failure, kiosk: true).contains("sent again by itself"))
  }
}

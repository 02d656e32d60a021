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

  @Test func plainHostsStillPass() {
    for host in ["127.0.0.1", "127.0.0.1:8080", "[::1]:80", "kiosk.local", "nas_1", "localhost."] {
      #expect(HostPolicy.isAllowed(host: host), "\(host)")
    }
  }
}

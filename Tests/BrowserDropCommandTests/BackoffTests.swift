import Testing

@testable import browserdrop

/// The kiosk's retry pauses: full jitter under a cap that doubles from 2 s to five minutes, so
/// kiosks that failed at the same moment (one share down for all) don't retry together.
struct BackoffTests {
  @Test func capsDoubleUpToFiveMinutes() {
    let backoff = Courier.Backoff()
    #expect(
      (1...10).map { backoff.ceiling(after: $0) } == [2, 4, 8, 16, 32, 64, 128, 256, 300, 300])
    #expect(backoff.ceiling(after: 1_000) == 300)
  }

  @Test func pausesAreSpreadBelowTheCap() {
    let backoff = Courier.Backoff()
    var random = SystemRandomNumberGenerator()
    for failures in 1...12 {
      let pauses = (0..<200).map { _ in backoff.delay(after: failures, using: &random) }
      let cap = backoff.ceiling(after: failures)
      #expect(pauses.allSatisfy { $0 >= 0.1 && $0 <= cap })
      // Spread over the whole range, not bunched at the cap as a plain doubling would be.
      #expect(pauses.min()! < cap / 4 && pauses.max()! > cap * 3 / 4, "\(failures)")
    }
  }
}

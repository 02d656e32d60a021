import BrowserDropTestSupport
import Foundation
import Testing

/// Issue 16, case 2: three kiosks with `--batch-folder intake` delivering into one folder of a
/// local disk and of a real smbd (one of the test's own, so it can be stopped), same names and
/// sizes, different contents, some rounds with `kill -9` (and on SMB a server outage). Every
/// upload must be at the destination exactly once with its own bytes, nothing else may be
/// there, and no temporary file may be left. `Benchmarks/custody-soak.sh` runs the same with
/// more rounds (`BROWSERDROP_FLEET_ROUNDS`, `…_KILLS`, `…_OUTAGES`, `…_KIOSKS`).
@Suite("A fleet of kiosks sharing one folder", .serialized)
struct FleetTests {
  static func plan(_ place: Fleet.Place) -> Fleet.Plan {
    let environment = ProcessInfo.processInfo.environment
    func number(_ name: String, _ fallback: Int) -> Int {
      environment["BROWSERDROP_FLEET_\(name)"].flatMap { Int($0) } ?? fallback
    }
    return Fleet.Plan(
      place: place, kiosks: number("KIOSKS", 3), rounds: number("ROUNDS", 6),
      kills: number("KILLS", 2), outages: number("OUTAGES", 1),
      bigSize: number("BIG_SIZE", 6 << 20), seed: number("SEED", 16))
  }

  @Test(
    "Same names, same sizes, other contents: each delivered once, as uploaded",
    arguments: [
      Fleet.Place.local, .smb,
    ])
  func fleet(place: Fleet.Place) async throws {
    var fleet = try Fleet(Self.plan(place))
    let counts = try await fleet.run()
    print("fleet \(place) \(fleet.plan.kiosks) kiosks, \(fleet.plan.rounds) rounds: \(counts)")
    #expect(counts.clean, "\(counts)")
    #expect(counts.delivered == counts.uploaded, "\(counts)")
  }
}

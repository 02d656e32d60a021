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

  /// Issue 16's claim window with a real `kill -9`: one kiosk sends 40 small files to a real
  /// smbd and is killed while one of its claim children (`bd-smb-claim`, the process that
  /// creates a final name and records it) runs. Restarted on the same staging, it delivers
  /// every file exactly once with its own bytes, no temporary file stays, and nothing else is on
  /// the share except what docs/forwarding.md's move window allows: a kill between the claim's
  /// record and the end of libsmbclient's rename over it may leave that empty claim, which the
  /// kiosk must then report as a possible leftover at that name, while the file arrives under
  /// the next number (`renamed`).
  @Test func killedWhileAClaimChildRuns() async throws {
    let folder = try TemporaryFolder()
    let smbPort = try FreePort.closed()
    let base = folder.path("smbd")
    try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
    try await LoopbackSMB.run("up", base: base, port: smbPort)
    let arguments = [
      "--kiosk", "--json", "--port", "0", "--bind", "127.0.0.1", "--quiet-period", "0.3",
      "--staging", folder.path("staging").path, "--to",
      "smb://127.0.0.1:\(smbPort)/guest/claims", "--batch-folder", "intake",
    ]
    let intake = base.appending(path: "shares/guest/claims/intake")
    var sources: [String: URL] = [:]
    var claimChild: Substring?
    var events: [JSONObject] = []
    do {
      let kiosk = try CommandProcess(arguments)
      let port = try await kiosk.listeningPort()
      for index in 0..<40 {
        let name = "f\(index).txt"
        let source = try folder.makeFile("src/\(name)", size: 200 + index, seed: UInt8(index))
        #expect(try await Uploader.upload(source, as: name, port: port) == 201)
        sources[name] = source
      }
      try await CrashTrialTests.waitUntil(
        "a claim child of the kiosk", timeout: 60, every: .milliseconds(1),
        output: { kiosk.outputLines }
      ) {
        claimChild = Self.claimChild(of: kiosk.pid)
        return claimChild != nil
      }
      try await CrashTrialTests.sigkill(kiosk)
      // Usually the child is still at work once the kiosk is gone: it then finishes alone.
      let outlived = claimChild.map { Self.isClaimChild($0) } ?? false
      print("claim child \(claimChild ?? "none") outlived the killed kiosk: \(outlived)")
      let restarted = try CommandProcess(arguments)
      _ = try await restarted.listeningPort()
      let journal = folder.path("staging/outbox/journal")
      try await CrashTrialTests.waitUntil(
        "every file forwarded", timeout: 120, every: .milliseconds(50),
        output: { restarted.outputLines }
      ) {
        CrashTrialTests.entries(journal).allSatisfy { $0.hasPrefix(".") }
          && CrashTrialTests.allFiles(in: intake).count >= sources.count
      }
      restarted.send(SIGTERM)
      #expect(try await restarted.waitForExit(timeout: 60) == 0)
      events = kiosk.events + restarted.events
    } catch {
      try? await LoopbackSMB.run("down", base: base, port: smbPort)
      throw error
    }
    try await LoopbackSMB.run("down", base: base, port: smbPort)
    let found = Set(CrashTrialTests.allFiles(in: intake))
    let forwarded = events.filter { $0.event == "forwarded" }
    // Where each source went: its own name, or the name a `renamed` entry gives it.
    var deliveredTo: [String: String] = [:]
    for rename in forwarded.flatMap({ ($0["renamed"] as? [[String: String]]) ?? [] }) {
      if let from = rename["from"], let to = rename["to"] { deliveredTo[from] = to }
    }
    let reported = Set(
      forwarded.flatMap { ($0["possibleLeftovers"] as? [[String: String]]) ?? [] }
        .compactMap { $0["path"] })
    var accounted: Set<String> = []
    for (name, source) in sources {
      let target = deliveredTo[name] ?? name
      accounted.insert(target)
      #expect(
        FileManager.default.contents(atPath: intake.appending(path: target).path)
          == FileManager.default.contents(atPath: source.path), "\(name) at \(target)")
    }
    // Anything else must be an empty claim the kiosk reported at a name no file went to.
    let others = found.subtracting(accounted)
    for name in others {
      let bytes = FileManager.default.contents(atPath: intake.appending(path: name).path)
      #expect(bytes?.isEmpty == true && reported.contains(name), "unexpected \(name)")
    }
    #expect(found.count == sources.count + others.count)
    print("claim window: \(others.count) empty claim(s) left and reported: \(others.sorted())")
  }

  /// A child of process `pid` named `bd-smb-claim` right now, if any.
  static func claimChild(of pid: Int32) -> Substring? {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
    for task in tasks {
      let path = "/proc/\(pid)/task/\(task)/children"
      for child in ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(
        separator: " ")
      where isClaimChild(child) {
        return child
      }
    }
    return nil
  }

  /// Whether process `pid` is a claim child.
  static func isClaimChild(_ pid: Substring) -> Bool {
    ((try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)) ?? "")
      .hasPrefix("bd-smb-claim")
  }
}

import BrowserDropTestSupport
import Foundation
import Testing

/// The kiosk's batch switch: the closing session hands its listening socket to the next, so a
/// request that arrives while one batch closes is served by the next session, never refused or
/// cut (before, the listener closed and reopened: a client that did not retry saw no answer).
@Suite("Kiosk batch switch")
struct KioskSwitchTests {
  @Test(
    "Uploads sent across many batch switches, never retried, are all answered and forwarded once")
  func uploadsAcrossBatchSwitches() async throws {
    let folder = try TemporaryFolder()
    let quietPeriod = 0.2
    let command = try KioskTests.start(folder, quietPeriod: "\(quietPeriod)")
    defer { Task { await command.stop() } }
    let port = try await command.listeningPort()
    var random = CrashTrialTests.Seeded(16)
    var sources: [String: URL] = [:]
    var statuses: [String: Int] = [:]
    var slowest = Duration.zero
    let rounds = 20
    let perRound = 4
    var round = 0
    var handedOver = 0
    // A switch lasts a few milliseconds: 20 rounds usually meet one; when they did not, 20
    // more (five times at most: a loaded machine once needed 60), so that the test never
    // passes without meeting one.
    while handedOver == 0, round < 6 * rounds {
      for _ in 0..<rounds {
        var names: [String] = []
        for index in 0..<perRound {
          let name = "r\(round)-\(index).bin"
          names.append(name)
          sources[name] = try folder.makeFile(
            "src/" + name, size: 1_000 + round * 97 + index,
            seed: UInt8(truncatingIfNeeded: round &* 7 &+ index))
        }
        // Quiet for about the quiet period, so the batch closes about when the next requests go
        // out (the kiosk looks every 50 ms, so it closes 200 to 250 ms after the last upload);
        // they go a few milliseconds apart, to land at different moments of the switch.
        try await Task.sleep(for: .milliseconds(Int.random(in: 190...260, using: &random)))
        var uploads: [(String, UploadInFlight, ContinuousClock.Instant)] = []
        for name in names {
          let sent = ContinuousClock.now
          uploads.append((name, try Uploader.start(sources[name]!, as: name, port: port), sent))
          try await Task.sleep(for: .milliseconds(Int.random(in: 0...15, using: &random)))
        }
        for (name, upload, sent) in uploads {
          statuses[name] = try await Uploader.status(of: upload)
          slowest = max(slowest, ContinuousClock.now - sent)
        }
        round += 1
      }
      let answered = statuses.filter { $0.value == 201 }.count
      try await CrashTrialTests.waitUntil(
        "every batch to close and be forwarded", timeout: 120, every: .milliseconds(50),
        output: { command.outputLines }
      ) {
        let events = command.events
        let closed = events.filter { $0.event == "batchClosed" }
        let forwarded = events.filter { $0.event == "forwarded" }
        return closed.reduce(0) { $0 + ($1.int("files") ?? 0) } >= answered
          && forwarded.count == closed.count
      }
      handedOver = try Self.handedOver(command.events)
    }
    let total = round * perRound
    // How long a request met by a switch waits (the answers are read in order: an upper bound).
    print("kiosk switch: slowest of \(total) uploads answered after \(slowest)")
    print("kiosk switch: \(handedOver) of \(total) uploads handed to the next session")
    // Not vacuous: some upload met a switch (parked, or queued on the handed-over socket). The
    // test's uploads are the only connections, one each.
    #expect(handedOver > 0, "no upload met a batch switch in \(round) rounds")
    #expect(handedOver <= total)
    let unanswered = statuses.filter { $0.value != 201 }.keys.sorted()
    #expect(unanswered.isEmpty, "not answered 201: \(unanswered.map { "\($0) \(statuses[$0]!)" })")

    command.send(SIGTERM)
    #expect(try await command.waitForExit() == 0)

    let events = command.events
    let batches = events.filter { $0.event == "batchClosed" }.count
    #expect(batches >= 4, "the uploads were meant to meet several batch switches: \(batches)")
    #expect(!events.contains { $0.event == "uploadFailed" }, "\(command.outputLines)")
    let dest = folder.path("dest")
    let delivered = TemporaryFolder.files(in: dest)
    var copies: [String: Int] = [:]
    for path in delivered { copies[URL(fileURLWithPath: path).lastPathComponent, default: 0] += 1 }
    #expect(copies.count == total, "\(total - copies.count) files missing")
    #expect(copies.values.allSatisfy { $0 == 1 }, "\(copies.filter { $0.value != 1 })")
    for path in delivered {
      let source = try #require(sources[URL(fileURLWithPath: path).lastPathComponent], "\(path)")
      #expect(
        try Data(contentsOf: dest.appending(path: path)) == Data(contentsOf: source), "\(path)")
    }
    #expect(KioskTests.journal(folder).isEmpty)
    // Each upload is reported (started and finished) between the line that closed the batch
    // before its own and its own batch's line, the handed-over ones too: the next session's
    // lines wait for the closing batch's line.
    let batchOf = Self.batchReportedIn(events)
    for path in delivered {
      let parts = path.split(separator: "/").map(String.init)
      try #require(parts.count == 2, "\(path) is not batch/name")
      #expect(
        batchOf[parts[1]] == parts[0], "\(path) reported with batch \(batchOf[parts[1]] ?? "none")")
    }
  }

  /// The batch whose `batchClosed` line is the first after each upload's `uploadStarted` and
  /// `uploadFinished` lines, by the upload's path; "split" when the two lines are reported with
  /// different batches.
  static func batchReportedIn(_ events: [JSONObject]) -> [String: String] {
    var batchOf: [String: String] = [:]
    var open: [String] = []
    for event in events {
      if event.event == "uploadStarted" || event.event == "uploadFinished",
        let path = event.string("path")
      {
        open.append(path)
      } else if event.event == "batchClosed", let batch = event.string("batch") {
        for path in open {
          batchOf[path] = batchOf[path].map { $0 == batch ? $0 : "split" } ?? batch
        }
        open = []
      }
    }
    return batchOf
  }

  /// How many connections the batch switches handed to the next session, as the kiosk counted
  /// them: the sum of `batchClosed`'s `handedOver`, which every such line has.
  static func handedOver(_ events: [JSONObject]) throws -> Int {
    try events.filter { $0.event == "batchClosed" }.reduce(0) {
      $0 + (try #require($1.int("handedOver"), "batchClosed without handedOver"))
    }
  }
}

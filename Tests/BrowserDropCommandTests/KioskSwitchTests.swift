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
    // How many of the kiosk's lines were out when each upload was sent.
    var marks: [String: Int] = [:]
    let rounds = 20
    let perRound = 4
    var round = 0
    var metSwitch = 0
    // A switch lasts a few milliseconds: 20 rounds meet one almost always; when they did not,
    // 20 more (twice at most), so that the test never passes without meeting one.
    while metSwitch == 0, round < 3 * rounds {
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
          marks[name] = command.events.count
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
      metSwitch = Self.uploadsThatMetASwitch(
        events: command.events, delivered: TemporaryFolder.files(in: folder.path("dest")),
        marks: marks)
    }
    let total = round * perRound
    // How long a request met by a switch waits (the answers are read in order: an upper bound).
    print("kiosk switch: slowest of \(total) uploads answered after \(slowest)")
    print("kiosk switch: \(metSwitch) of \(total) uploads sent before the previous batch closed")
    // Not vacuous: some upload met a switch.
    #expect(metSwitch > 0, "no upload met a batch switch in \(round) rounds")
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
  }

  /// How many uploads were sent (`marks`: how many of the kiosk's lines were out then) before
  /// the batch before theirs was reported closed, yet landed in the next batch (`delivered`:
  /// `batch/name` paths): they met a switch (waited on the handed-over socket, or parked). A
  /// slight over-count: one sent while the closed batch moved into the outbox, after the next
  /// session started, counts too, and so does one sent just after a report the test had not
  /// read yet.
  static func uploadsThatMetASwitch(
    events: [JSONObject], delivered: [String], marks: [String: Int]
  ) -> Int {
    let closings = events.enumerated().filter { $0.element.event == "batchClosed" }
      .map { (index: $0.offset, batch: $0.element.string("batch") ?? "") }
    var met = 0
    for path in delivered {
      let parts = path.split(separator: "/")
      guard parts.count == 2, let mark = marks[String(parts[1])],
        let position = closings.firstIndex(where: { $0.batch == parts[0] }), position > 0
      else { continue }
      if closings[position - 1].index >= mark { met += 1 }
    }
    return met
  }
}

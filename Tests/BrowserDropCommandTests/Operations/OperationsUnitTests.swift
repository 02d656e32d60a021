import BrowserDrop
import Foundation
import Testing

@testable import browserdrop

/// The decisions of Operations/ without sockets or daemons: the flags' values, the `STATUS=`
/// line, the exposition text and the metrics requests.
@Suite("Operations, in process")
struct OperationsUnitTests {
  @Test("--metrics: a bare port is loopback; other addresses only when written out")
  func metricsFlag() throws {
    let flag = "--metrics"
    #expect(
      try OperationsFlags.metrics(flag, "9464") == MetricsEndpoint(host: "127.0.0.1", port: 9464))
    #expect(
      try OperationsFlags.metrics(flag, "0.0.0.0:9464")
        == MetricsEndpoint(host: "0.0.0.0", port: 9464))
    #expect(try OperationsFlags.metrics(flag, "[::1]:0") == MetricsEndpoint(host: "::1", port: 0))
    #expect(MetricsEndpoint(host: "::1", port: 9).shown == "[::1]:9")
    for bad in ["", "x", "65536", "localhost:9464", "1.2.3:80", "[::1]", "[::1]9", ":80", "-1"] {
      #expect(throws: UsageError.self, "\(bad)") { try OperationsFlags.metrics(flag, bad) }
    }
    let parsed = try ArgumentParser.parse(
      ["--metrics=9464", "--name", "Intake.local"], environment: [:])
    guard case .run(let options) = parsed else { Issue.record("not a run"); return }
    #expect(options.metrics == MetricsEndpoint(host: "127.0.0.1", port: 9464))
    #expect(options.advertisedName == "intake")
  }

  @Test("--name: one DNS label")
  func nameFlag() throws {
    #expect(try OperationsFlags.name("--name", "intake-2") == "intake-2")
    #expect(try OperationsFlags.name("--name", "Intake.local.") == "intake")
    for bad in ["", "-a", "a-", "a.b", "a b", "ü", String(repeating: "x", count: 64), ".local"] {
      #expect(throws: UsageError.self, "\(bad)") { try OperationsFlags.name("--name", bad) }
    }
  }

  @Test("--name becomes the library's setting, Configuration.localName")
  func nameSetting() throws {
    guard case .run(let named) = try ArgumentParser.parse(["--name", "Intake"], environment: [:]),
      case .run(let plain) = try ArgumentParser.parse([], environment: [:])
    else {
      Issue.record("not a run")
      return
    }
    #expect(named.serverConfiguration(port: 80).localName == (try LocalName("intake")))
    #expect(plain.serverConfiguration(port: 80).localName == nil)
  }

  @Test("The STATUS= line follows batches and forwards")
  func statusLine() {
    var snapshot = OperationsState.Snapshot()
    snapshot.listening = true
    #expect(
      snapshot.statusLine(kiosk: true, destination: "nas.local")
        == "no batch waiting; nothing forwarded yet to nas.local")
    snapshot.outboxBatches = 3
    snapshot.lastForwardEnded = Date().timeIntervalSince1970
    let time = WallClock.hoursAndMinutes(snapshot.lastForwardEnded!)
    #expect(
      snapshot.statusLine(kiosk: true, destination: "nas.local")
        == "3 batches waiting; last forward \(time) OK to nas.local")
    snapshot.lastForwardFailure = "Couldn't reach nas.local."
    snapshot.listening = false
    #expect(
      snapshot.statusLine(kiosk: true, destination: "nas.local")
        == "not listening; 3 batches waiting; last forward \(time) failed to nas.local")
    #expect(snapshot.unhealthyReason == "The upload listener is not listening.")
    snapshot.listening = true
    #expect(snapshot.unhealthyReason == "The last forward failed: Couldn't reach nas.local.")
  }

  @Test("Counting reports: a paused upload leaves the in-flight count until it is resumed")
  func countingPausedUploads() {
    let state = OperationsState()
    let first = Upload(id: 1, relativePath: "a.bin", size: 10)
    let second = Upload(id: 2, relativePath: "b.bin", size: 10)
    state.note(.server(.uploadStarted(first)))
    state.note(.server(.uploadStarted(second)))
    state.note(.pause(.paused(first, keptBytes: 4)))
    state.note(.pause(.paused(second, keptBytes: 6)))
    #expect(state.snapshot.inFlight == 0)
    #expect(state.snapshot.paused == [1, 2])
    state.note(.pause(.resumed(first, offset: 4)))
    #expect(state.snapshot.inFlight == 1)
    #expect(state.snapshot.paused == [2])
    // The one still paused expires: it ends, counted once, and was not in flight.
    state.note(.server(.uploadFailed(second, .timedOut)))
    #expect(state.snapshot.inFlight == 1)
    #expect(state.snapshot.paused.isEmpty)
    #expect(state.snapshot.uploads == ["timed_out": 1])
    #expect(MetricsText.render(state.snapshot, now: 0).contains("browserdrop_uploads_paused 0\n"))
  }

  @Test("Counting reports: uploads by outcome, bytes, batches, forwards")
  func counting() {
    let state = OperationsState()
    let upload = Upload(id: 1, relativePath: "a.bin", size: 10)
    state.note(.listening([]))
    state.note(.server(.uploadStarted(upload)))
    #expect(state.snapshot.inFlight == 1)
    state.note(.server(.uploadFailed(upload, .timedOut)))
    state.note(.batchClosed(name: "b", files: 1, bytes: 1, handedOver: 0))
    state.noteRecoveredBatches(2)
    #expect(state.snapshot.uploads == ["timed_out": 1])
    #expect(state.snapshot.outboxBatches == 3)
    state.note(.forwardFailed(message: "down", staging: "/x"))
    #expect(state.snapshot.unhealthyReason == "The last forward failed: down")
    state.note(.server(.interrupted))
    #expect(!state.snapshot.listening)
  }

  @Test("The exposition: HELP and TYPE for each family, every outcome, the loop's growing lag")
  func exposition() {
    var snapshot = OperationsState.Snapshot()
    snapshot.uploads = ["stored": 2]
    snapshot.lastLoopTick = 100
    snapshot.loopTickInterval = 1
    snapshot.loopLag = 0.002
    let text = MetricsText.render(snapshot, now: 100.5)
    #expect(text.contains("# TYPE browserdrop_uploads_total counter\n"))
    #expect(text.contains("browserdrop_uploads_total{outcome=\"stored\"} 2\n"))
    #expect(text.contains("browserdrop_uploads_total{outcome=\"cancelled\"} 0\n"))
    #expect(text.contains("browserdrop_event_loop_lag_seconds 0.002\n"))
    #expect(text.contains("# TYPE browserdrop_forward_possible_leftovers_total counter\n"))
    #expect(text.contains("browserdrop_forward_possible_leftovers_total 0\n"))
    // Not probed yet: absent rather than a made-up value.
    #expect(!text.contains("browserdrop_staging_free_bytes "))
    // A loop that has not run its timer for 4 s past due.
    #expect(
      MetricsText.render(snapshot, now: 105).contains("browserdrop_event_loop_lag_seconds 4\n"))
    let helps = text.split(separator: "\n").filter { $0.hasPrefix("# HELP ") }.count
    let types = text.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }.count
    // Twelve families, less the two not probed yet.
    #expect(helps == types && helps == 10)
  }

  @Test("The metrics listener answers GET and HEAD, refuses other methods and garbage")
  func requests() {
    let ok = { (_: String) in MetricsServer.Response(status: "200 OK", body: "x") }
    #expect(
      MetricsServer.respond(to: "GET /metrics?x=1 HTTP/1.1\r\n\r\n") { path in
        MetricsServer.Response(status: path == "/metrics" ? "200 OK" : "404", body: "x")
      }.status == "200 OK")
    #expect(MetricsServer.respond(to: "HEAD /metrics HTTP/1.1\r\n\r\n", ok).body == "")
    #expect(MetricsServer.respond(to: "POST /metrics HTTP/1.1\r\n\r\n", ok).status.hasPrefix("405"))
    #expect(MetricsServer.respond(to: "\u{16}\u{03}\r\n\r\n", ok).status.hasPrefix("400"))
  }
}

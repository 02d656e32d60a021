import BrowserDropTestSupport
import Foundation
import Testing

/// systemd's notify protocol, read from a `NOTIFY_SOCKET` of the test's own: `READY=1` once
/// listening, `STATUS=` following the outbox and forwards, `WATCHDOG=1` at half of
/// `WATCHDOG_USEC` from the event loop (none while the loop is blocked on purpose),
/// `STOPPING=1` at SIGTERM. And the kiosk unit that asks for all of it.
@Suite("systemd notify and watchdog")
struct SystemdNotifyTests {
  static func kiosk(
    _ folder: TemporaryFolder, notify: NotifySocket, _ environment: [String: String] = [:]
  ) throws -> CommandProcess {
    try CommandProcess(
      [
        "--kiosk", "--json", "--port", "0", "--bind", "127.0.0.1", "--quiet-period", "0.3",
        "--staging", folder.path("staging").path, "--to", folder.path("dest").path,
        "--batch-folder", "batch {n}",
      ], environment: ["NOTIFY_SOCKET": notify.path].merging(environment) { $1 })
  }

  /// The gaps between consecutive times.
  static func gaps(_ times: [Double]) -> [Double] {
    zip(times.dropFirst(), times).map { $0 - $1 }
  }

  @Test("READY=1 once listening, STATUS= kept current, WATCHDOG=1 every half period, STOPPING=1")
  func protocolMessages() async throws {
    let folder = try TemporaryFolder()
    let notify = try NotifySocket(in: folder)
    defer { notify.close() }
    // 400 ms: pings every 200 ms.
    let command = try Self.kiosk(folder, notify: notify, ["WATCHDOG_USEC": "400000"])
    defer { Task { await command.stop() } }
    let port = try await command.listeningPort()
    let ready = try await notify.waitFor("READY=1") { $0.hasPrefix("READY=1\n") }
    let dest = folder.path("dest").path
    #expect(ready.text == "READY=1\nSTATUS=no batch waiting; nothing forwarded yet to \(dest)")
    // No ping before READY: the loop's timer starts with it.
    #expect(notify.messages.first?.text.hasPrefix("READY=1") == true)

    let file = try folder.makeFile("a.bin", size: 10_000, seed: 1)
    #expect(try await Uploader.upload(file, as: "a.bin", port: port) == 201)
    try await command.waitForEvent("forwarded")
    let forwarded = try await notify.waitFor("STATUS= after the forward") {
      $0.hasPrefix("STATUS=") && $0.contains("OK to")
    }
    let time = try #require(
      forwarded.text.wholeMatch(of: /STATUS=no batch waiting; last forward (\d\d:\d\d) OK to (.*)/))
    #expect(time.2 == dest)

    // Ten pings at least, then the cadence: half of WATCHDOG_USEC.
    let deadline = Date().addingTimeInterval(20)
    while notify.watchdogTimes.count < 12, Date() < deadline {
      try await Task.sleep(for: .milliseconds(50))
    }
    let gaps = Self.gaps(notify.watchdogTimes).sorted()
    try #require(gaps.count >= 10, "\(notify.messages.map(\.text))")
    let median = gaps[gaps.count / 2]
    #expect(median > 0.17 && median < 0.3, "median gap \(median) s; gaps \(gaps)")

    command.send(SIGTERM)
    #expect(try await command.waitForExit() == 0)
    let stopping = try await notify.waitFor("STOPPING=1") { $0.hasPrefix("STOPPING=1") }
    #expect(stopping.time > forwarded.time)
  }

  @Test("No WATCHDOG=1 while the event loop is blocked, and the pings resume after it")
  func blockedLoop() async throws {
    let folder = try TemporaryFolder()
    let notify = try NotifySocket(in: folder)
    defer { notify.close() }
    // Pings every 200 ms; 1 s after READY the loop is blocked for 2 s (the test seam).
    let command = try Self.kiosk(
      folder, notify: notify,
      ["WATCHDOG_USEC": "400000", "BROWSERDROP_TEST_LOOP_STALL": "1000:2000"])
    defer { Task { await command.stop() } }
    _ = try await command.listeningPort()
    let ready = try await notify.waitFor("READY=1") { $0.hasPrefix("READY=1\n") }
    let deadline = Date().addingTimeInterval(30)
    while Date() < deadline {
      if notify.watchdogTimes.filter({ $0 > ready.time + 3.5 }).count >= 3 { break }
      try await Task.sleep(for: .milliseconds(50))
    }
    let times = notify.watchdogTimes
    let gaps = Self.gaps(times)
    let longest = try #require(gaps.max())
    // The blocked 2 s have no ping at all; none of the other gaps comes near it.
    #expect(longest >= 1.9 && longest < 3.5, "gaps \(gaps)")
    let index = try #require(gaps.firstIndex(of: longest))
    #expect(
      times[index] - ready.time < 2, "the stall began \(times[index] - ready.time) s after READY")
    #expect(gaps.filter { $0 > 1 }.count == 1, "gaps \(gaps)")
    #expect(times.filter { $0 > times[index + 1] }.count >= 2, "pings resumed")
    command.send(SIGTERM)
    #expect(try await command.waitForExit() == 0)
  }

  @Test("Without NOTIFY_SOCKET nothing is sent and libsystemd is never loaded")
  func withoutNotifySocket() async throws {
    let folder = try TemporaryFolder()
    let command = try CommandProcess(
      [
        "--kiosk", "--json", "--port", "0", "--bind", "127.0.0.1",
        "--staging", folder.path("staging").path, "--to", folder.path("dest").path,
      ], environment: ["WATCHDOG_USEC": "400000"])
    defer { Task { await command.stop() } }
    _ = try await command.listeningPort()
    let maps = try String(contentsOfFile: "/proc/\(command.pid)/maps", encoding: .utf8)
    #expect(!maps.contains("libsystemd"))
    command.send(SIGTERM)
    #expect(try await command.waitForExit() == 0)
  }

  @Test("The kiosk unit is Type=notify with a watchdog")
  func unit() throws {
    let text = try String(contentsOf: ExampleTests.unit, encoding: .utf8)
    let settings = ExampleTests.settings(text)
    func values(_ key: String) -> [String] {
      settings.filter { $0.key == key }.map(\.value)
    }
    #expect(values("Type") == ["notify"])
    #expect(values("WatchdogSec") == ["30"])
    #expect(values("NotifyAccess") == ["main"])
  }
}

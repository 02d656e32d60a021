import BrowserDrop
import BrowserDropSystem
import FoundationEssentials
import Glibc
import Synchronization

/// The command's operating surface for a service that runs for months: systemd's notify
/// protocol and watchdog, `--metrics` with `/metrics` and `/healthz`, and the lines and address
/// list for `--name` (published by the library, `Configuration.localName`). It watches the
/// command's reports (``observing(_:)``), so the one-shot and kiosk code only pass it a few
/// facts the reports don't carry.
final class Operations: Sendable {
  let state = OperationsState()
  private let notifier: SystemdNotifier
  private let metrics: MetricsServer?
  private let probe: OperationsProbe
  private let kiosk: Bool
  private let stallForTesting: (after: Duration, for: Duration)?
  private let flags = Mutex(Flags())
  /// Asks the probe to measure now rather than at its next turn (after a failed forward).
  private let probeNow = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
  private let mdns = Mutex(MDNSState())

  private struct MDNSState {
    /// The server's latest addresses.
    var addresses: [Address] = []
    /// The name published, once avahi-daemon said so.
    var published: LocalName?
    /// The last news shown: each kiosk batch is a session of its own, which hears the latest
    /// news again when it takes the name over.
    var shown: LocalNameChange?
    /// Where the news is shown.
    var display: (any Reporter)?
  }

  private struct Flags {
    var ready = false
    var stopping = false
  }

  /// Sets up what `options` and `environment` ask for. Throws a sentence naming `--metrics`
  /// when its address can't be listened on.
  init(
    options: CommandOptions, environment: [String: String], warn: (String) -> Void
  ) throws(OperationsFailure) {
    notifier = SystemdNotifier(environment: environment, warn: warn)
    probe = OperationsProbe(stagingRoot: options.stagingRoot, destination: options.destination)
    kiosk = options.kiosk
    stallForTesting = Self.stall(environment["BROWSERDROP_TEST_LOOP_STALL"])
    if let endpoint = options.metrics {
      do {
        metrics = try MetricsServer(host: endpoint.host, port: endpoint.port)
      } catch {
        throw OperationsFailure(
          message: "Can't serve metrics on \(endpoint.shown) (--metrics): "
            + (error.code == EADDRINUSE
              ? "the port is taken."
              : error.code == EADDRNOTAVAIL
                ? "it isn't an address of this computer." : "\(error.reason)."))
      }
    } else {
      metrics = nil
    }
  }

  /// A reporter that shows everything through `reporter` and counts it here.
  func observing(_ reporter: any Reporter) -> any Reporter {
    mdns.withLock { $0.display = reporter }
    return ObservingReporter(inner: reporter, operations: self)
  }

  /// Kiosk: `count` batches from an earlier run wait in the outbox.
  func noteRecoveredBatches(_ count: Int) {
    state.noteRecoveredBatches(count)
    updateStatus()
  }

  /// Shutdown began (a stop signal, or the one-shot session finishing): `STOPPING=1`.
  func stopping() {
    let first = flags.withLock { flags in
      defer { flags.stopping = true }
      return !flags.stopping
    }
    if first { notifier.stopping(status: "stopping") }
  }

  fileprivate func observe(_ report: Report) {
    let changed = state.note(report)
    switch report {
    case .listening(let addresses): started(addresses)
    case .finishing, .stopped: stopping()
    case .forwardFailed: probeNow.continuation.yield()
    case .server(.addressesChanged(let addresses)):
      mdns.withLock { $0.addresses = addresses }
    case .localName(let change): advertised(change)
    default: break
    }
    if changed { updateStatus() }
  }

  private func updateStatus() {
    guard flags.withLock({ $0.ready && !$0.stopping }) else { return }
    notifier.status(state.snapshot.statusLine(kiosk: kiosk, destination: probe.destinationName))
  }

  /// The first `listening` report: the event loop runs, so its timers can start.
  private func started(_ addresses: [Address]) {
    mdns.withLock { $0.addresses = addresses }
    let first = flags.withLock { flags in
      defer { flags.ready = true }
      return !flags.ready
    }
    guard first else { return }
    if let metrics {
      startMetrics(metrics)
    }
    notifier.ready(
      status: state.snapshot.statusLine(kiosk: kiosk, destination: probe.destinationName))
    if let stallForTesting {
      EventLoopTimer.stallForTesting(after: stallForTesting.after, for: stallForTesting.for)
    }
  }

  /// The server's address list with the published name first, as people should type it.
  fileprivate func withName(_ report: Report) -> Report {
    guard case .server(.addressesChanged(let addresses)) = report,
      let name = mdns.withLock({ $0.published }), let port = addresses.first?.port
    else { return report }
    return .server(.addressesChanged([Self.nameAddress(name, port: port)] + addresses))
  }

  private static func nameAddress(_ name: LocalName, port: Int) -> Address {
    Address(host: name.hostName, port: port, kind: .other, interface: "mDNS")
  }

  /// News from avahi-daemon, through the server: the name in use (shown, and first in the
  /// address list), a taken name, or one line saying why nothing is advertised. News a new
  /// batch's session repeats is not shown again.
  private func advertised(_ change: LocalNameChange) {
    let (display, addresses, fresh, withdrawn) = mdns.withLock {
      state -> ((any Reporter)?, [Address], Bool, Bool) in
      // A name confirmed before the first address list (never seen: it takes avahi-daemon
      // about a second) waits for the next session's repeat of it.
      if case .published = change, state.addresses.isEmpty { return (nil, [], false, false) }
      let fresh = state.shown != change
      state.shown = change
      let before = state.published
      if case .published(let name) = change {
        state.published = name
      } else {
        state.published = nil
      }
      return (state.display, state.addresses, fresh, before != nil && state.published == nil)
    }
    guard let display, fresh else { return }
    switch change {
    case .published(let name):
      let address = Self.nameAddress(name, port: addresses.first?.port ?? 80)
      display.report(
        .notice(
          "Advertised as \(address.url.absoluteString) (\"BrowserDrop on \(name.label)\") through"
            + " avahi-daemon."))
      display.report(.server(.addressesChanged([address] + addresses)))
      return
    case .renamed(let name):
      display.report(
        .notice(
          "Another machine uses that name on this network; trying \(name.hostName) (Avahi's"
            + " alternative)."))
    case .unavailable(let message):
      display.report(.notice(message))
    }
    // The name no longer resolves: the list goes back to the addresses alone.
    if withdrawn { display.report(.server(.addressesChanged(addresses))) }
  }

  /// Measures once, then waits: 5 s, or less when a forward failed, so a dead NAS shows within
  /// a second; between the two the task sleeps, with no wake-up of its own.
  ///
  /// A function of its own, never inlined into the loop that calls it: with the task group
  /// inside that loop's closure, Swift 6.3's loop-invariant code motion ran for more than
  /// 45 minutes on the release build of this module (`-sil-print-pass-name` showed the pass and
  /// the closure).
  @inline(never)
  private func probeOnce() async {
    let reading = await probe.measure()
    state.noteProbe(stagingFreeBytes: reading.freeBytes, destinationReachable: reading.reachable)
    await withTaskGroup(of: Void.self) { group in
      group.addTask { try? await Task.sleep(for: .seconds(5)) }
      group.addTask {
        var pokes = self.probeNow.stream.makeAsyncIterator()
        _ = await pokes.next()
      }
      await group.next()
      group.cancelAll()
    }
  }

  private func startMetrics(_ metrics: MetricsServer) {
    let interval = 1.0
    EventLoopTimer.every(.seconds(interval)) { [state] late in
      state.noteLoopTick(
        late: Double(late.components.seconds) + Double(late.components.attoseconds) / 1e18,
        now: Monotonic.seconds(), interval: interval)
    }
    Task { [self] in
      while !Task.isCancelled { await probeOnce() }
    }
    let state = self.state
    do {
      try metrics.serve { path in
        switch path {
        case "/metrics":
          return MetricsServer.Response(
            status: "200 OK", contentType: MetricsText.contentType,
            body: MetricsText.render(state.snapshot, now: Monotonic.seconds()))
        case "/healthz":
          if let reason = state.snapshot.unhealthyReason {
            return MetricsServer.Response(status: "503 Service Unavailable", body: reason + "\n")
          }
          return MetricsServer.Response(status: "200 OK", body: "ok\n")
        default:
          return MetricsServer.Response(
            status: "404 Not Found", body: "Only /metrics and /healthz are served here.\n")
        }
      }
    } catch {
      StandardOutput.error.line("browserdrop: can't serve metrics: \(error.reason).")
    }
  }

  /// `AFTER_MS:FOR_MS`, the test seam that blocks the event loop once.
  private static func stall(_ text: String?) -> (after: Duration, for: Duration)? {
    guard let parts = text?.split(separator: ":"), parts.count == 2,
      let after = Int(parts[0]), let length = Int(parts[1])
    else { return nil }
    return (.milliseconds(after), .milliseconds(length))
  }

  /// The line that says where metrics are served, once listening; `nil` without `--metrics`.
  var metricsNotice: String? {
    metrics.map { "Metrics at \($0.url), health at /healthz." }
  }
}

/// `--metrics` could not be set up; the message names the flag.
struct OperationsFailure: Error {
  let message: String
}

/// Shows every report through the command's reporter and counts it for ``Operations``.
private struct ObservingReporter: Reporter {
  let inner: any Reporter
  let operations: Operations

  func report(_ report: Report) {
    operations.observe(report)
    inner.report(operations.withName(report))
    if case .listening = report, let notice = operations.metricsNotice {
      inner.report(.notice(notice))
    }
  }

  func setHint(_ hint: String) {
    inner.setHint(hint)
  }
}

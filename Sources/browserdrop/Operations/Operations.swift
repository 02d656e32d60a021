import BrowserDrop
import BrowserDropSystem
import FoundationEssentials
import Glibc
import Synchronization

/// The command's operating surface for a service that runs for months: systemd's notify
/// protocol and watchdog, `--metrics` with `/metrics` and `/healthz`. It watches the command's
/// reports (``observing(_:)``), so the one-shot and kiosk code only pass it a few facts the
/// reports don't carry.
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
  private let advertisedName: String?
  private let mdns = Mutex(MDNSState())

  private struct MDNSState {
    var advertiser: MDNSAdvertiser?
    /// The server's latest addresses.
    var addresses: [Address] = []
    /// The name published, once avahi-daemon said so.
    var published: String?
    /// Where the advertiser's news is shown.
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
    advertisedName = options.advertisedName
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
    if first {
      notifier.stopping(status: "stopping")
      mdns.withLock { $0.advertiser }?.stop()
    }
  }

  fileprivate func observe(_ report: Report) {
    let changed = state.note(report)
    switch report {
    case .listening(let addresses): started(addresses)
    case .finishing, .stopped: stopping()
    case .forwardFailed: probeNow.continuation.yield()
    case .server(.addressesChanged(let addresses)):
      let advertiser = mdns.withLock { state in
        state.addresses = addresses
        return state.advertiser
      }
      advertiser?.update(addresses)
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
    if let advertisedName, let port = addresses.first?.port {
      let advertiser = MDNSAdvertiser(name: advertisedName, port: port, addresses: addresses) {
        [self] change in advertised(change, port: port)
      }
      mdns.withLock { state in
        state.addresses = addresses
        state.advertiser = advertiser
      }
    }
  }

  /// The server's address list with the published name first, as people should type it.
  fileprivate func withName(_ report: Report) -> Report {
    guard case .server(.addressesChanged(let addresses)) = report,
      let name = mdns.withLock({ $0.published }), let port = addresses.first?.port
    else { return report }
    return .server(.addressesChanged([Self.nameAddress(name, port: port)] + addresses))
  }

  private static func nameAddress(_ name: String, port: Int) -> Address {
    Address(host: "\(name).local", port: port, kind: .other, interface: "mDNS")
  }

  /// News from avahi-daemon: the name in use (shown, and first in the address list), a taken
  /// name, or one line saying why nothing is advertised.
  private func advertised(_ change: MDNSAdvertiser.Change, port: Int) {
    let (display, addresses, announce) = mdns.withLock { state in
      var announce = false
      if case .established(let name) = change, state.published != name {
        state.published = name
        announce = true
      }
      return (state.display, state.addresses, announce)
    }
    guard let display else { return }
    switch change {
    case .established(let name):
      guard announce else { return }
      let address = Self.nameAddress(name, port: port)
      display.report(
        .notice(
          "Advertised as \(address.url.absoluteString) (\"BrowserDrop on \(name)\") through avahi-daemon."
        ))
      display.report(.server(.addressesChanged([address] + addresses)))
    case .renamed(let name):
      display.report(
        .notice(
          "Another machine uses that name on this network; trying \(name).local (Avahi's alternative)."
        ))
    case .failed(let message):
      display.report(.notice(message))
    }
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

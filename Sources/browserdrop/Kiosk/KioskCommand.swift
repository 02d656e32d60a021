import BrowserDrop
import BrowserDropSystem
import CBrowserDropLinux
import FoundationEssentials
import Glibc
import Synchronization

/// `--kiosk`: serve all day in batches. A batch closes after the quiet period with nothing in
/// flight, moves into the outbox and is forwarded while a new session starts at once on the
/// same listening socket, handed from the closing session to the next, so open pages carry on
/// and a request that arrives in between waits for the next session rather than failing.
struct KioskCommand {
  let options: CommandOptions
  let reporter: any Reporter
  /// systemd notify and metrics (Operations/): told what the reports don't say.
  var operations: Operations?

  /// Runs until SIGTERM or SIGINT and returns the exit status.
  func run() async -> Int32 {
    guard let destination = options.destination else { return 2 }
    // A kiosk runs for months: big blocks (a large batch's index, its forwarding manifest) get
    // mappings of their own and go back to the kernel when freed, rather than leaving holes in
    // the heap that its small blocks then pin.
    _ = cbd_map_large_allocations(512 * 1024)
    let triggers: Triggers
    do {
      triggers = try Triggers(signals: [SIGINT, SIGTERM], readsStandardInput: false)
    } catch {
      return fail("Can't watch for Ctrl-C and stop signals: \(error.reason).")
    }
    let stopRequested = StopFlag()
    let stopWatcher = Task {
      if await triggers.next() != nil {
        stopRequested.set()
        operations?.stopping()
      }
    }
    defer { stopWatcher.cancel() }

    let root = options.stagingRoot
    do {
      guard try StagingLock.acquire(root: root) else {
        return fail("Another browserdrop is using the staging folder \(root.path).")
      }
    } catch {
      return fail(StartFailure.message(for: error, options: options))
    }
    let outbox = Outbox(stagingRoot: root)
    let pattern = options.effectiveBatchFolder ?? .kioskDefault
    let recovered: (batches: [Batch], rescued: Int)
    do {
      recovered = try await BlockingIO.run {
        try outbox.recover { pattern.folderName(date: Date(), number: $0) }
      }
    } catch {
      return fail(
        "Can't open the outbox in \(outbox.directory.path): \(error.operationFailureText)")
    }
    BrowserDropServer.removeLeftovers(stagingRoot: root)
    let courier = Courier(
      outbox: outbox, destination: destination, policy: options.collisionPolicy,
      reporter: reporter)
    operations?.noteRecoveredBatches(recovered.batches.count)
    if !recovered.batches.isEmpty {
      reporter.report(
        .notice(
          Self.recoveredMessage(batches: recovered.batches.count)))
      await courier.enqueue(recovered.batches)
    }

    var port = options.port
    var first = true
    // The next session, started on the closing one's listening socket as soon as it finished,
    // before its batch moves into the outbox, so requests queued on the socket are not kept
    // waiting for the move's fsyncs.
    var next: LiveSession?
    // A session started already is finished even when a stop came meanwhile: its batch, if
    // anything arrived, goes into the outbox like any last batch.
    while !stopRequested.isSet || next != nil {
      // Started before the previous batch was reported: its lines come after that one's.
      next?.report()
      if !first {
        // The previous session and its index of received files are gone: give the memory they
        // held back, so a kiosk's footprint follows its largest batch, not its lifetime.
        _ = try? await BlockingIO.run { cbd_release_free_memory() }
      }
      let session: LiveSession
      if let started = next {
        session = started
        next = nil
      } else {
        do {
          session = try await LiveSession.start(
            configuration: options.serverConfiguration(port: port), reporter: reporter)
        } catch {
          if first { return fail(StartFailure.message(for: error, options: options)) }
          reporter.report(.notice("Can't start the next session yet: \(error)"))
          try? await Task.sleep(for: .seconds(2))
          continue
        }
      }
      if first {
        reporter.report(.listening(session.addresses))
        reporter.setHint(
          "kiosk: a batch closes after \(Self.seconds(options.quietPeriod)) without uploads")
        first = false
      }
      port = await session.server.port ?? port
      await Self.waitForBatchEnd(
        session.activity, quietPeriod: options.quietPeriod, stopRequested: stopRequested)

      let folder: URL?
      // The connections the next session found waiting on the handed-over socket.
      var handedOver = 0
      // Why the next session could not start: said after the closing batch's line, as the
      // next session's own lines are.
      var startFailure: (any Error)?
      defer {
        if let startFailure {
          reporter.report(.notice("Can't start the next session yet: \(startFailure)"))
        }
      }
      do {
        if stopRequested.isSet {
          folder = try await session.finish()
        } else {
          let finished = try await session.finishHandingOverListener()
          folder = finished.folder
          // A stop that came during the finish's grace: no next session, and the connections
          // waiting on the socket are closed with it (dropping the handover), as at any stop.
          if let handover = finished.handover, !stopRequested.isSet {
            switch await Self.startNext(
              on: handover, options: options, port: port, reporter: reporter)
            {
            case .success(let started): next = started
            case .failure(let error): startFailure = error
            }
            handedOver = handover.connectionsTakenOver ?? 0
          }
        }
      } catch {
        reporter.report(.notice("The session could not be closed: \(error)"))
        continue
      }
      // The finished folder stays in the staging root until it moves: the next session only
      // made a folder of its own there, and nothing removes leftovers while the kiosk runs.
      guard let folder else { continue }
      let files = await session.server.receivedFiles
      do {
        let batch = try await BlockingIO.run {
          try outbox.add(folder) { pattern.folderName(date: Date(), number: $0) }
        }
        reporter.report(
          .batchClosed(
            name: batch.folderName, files: files.count,
            bytes: files.reduce(0) { $0 + Int64($1.size) }, handedOver: handedOver))
        await courier.enqueue([batch])
      } catch {
        reporter.report(
          .notice("Can't move the batch into the outbox (kept in \(folder.path)): \(error)"))
      }
    }

    await courier.stop()
    let waiting = await courier.waiting
    let message = Self.stoppedMessage(waiting: waiting)
    reporter.report(.stopped(message: message, staging: waiting == 0 ? nil : outbox.directory.path))
    return 0
  }

  /// Starts the next session on the listening socket the closing one handed over, its reports
  /// held until the closing batch's line is out. When it fails, the caller drops the handover,
  /// which closes the socket and the connections waiting on it: clients are refused and the
  /// page tries again, rather than waiting on a socket nobody serves while the loop opens a
  /// fresh one every two seconds.
  private static func startNext(
    on handover: ListenerHandover, options: CommandOptions, port: Int, reporter: any Reporter
  ) async -> Result<LiveSession, any Error> {
    do {
      return .success(
        try await LiveSession.start(
          configuration: options.serverConfiguration(port: port), reporter: reporter,
          handover: handover, held: true))
    } catch {
      return .failure(error)
    }
  }

  /// Returns when the batch should close (files received, nothing in flight, quiet for the
  /// quiet period) or a stop was requested. Time is `clock`'s (a test's runs by hand).
  static func waitForBatchEnd(
    _ activity: SessionActivity, quietPeriod: Double, stopRequested: StopFlag,
    clock: QuietClock = QuietClock()
  ) async {
    let step = min(0.25, quietPeriod / 4)
    while !stopRequested.isSet {
      if activity.files > 0, activity.inFlight == 0,
        activity.quietSeconds(now: clock.now()) >= quietPeriod
      {
        return
      }
      await clock.sleep(step)
    }
  }

  /// The notice at start when a crash left `batches` batches in the outbox.
  static func recoveredMessage(batches: Int) -> String {
    "\(ReportText.count(batches, "batch")) from an earlier run "
      + (batches == 1
        ? "waits in the outbox; forwarding it first."
        : "wait in the outbox; forwarding them first.")
  }

  /// The last line when the kiosk stops with `waiting` batches not yet forwarded.
  static func stoppedMessage(waiting: Int) -> String {
    guard waiting > 0 else { return "Stopped." }
    return "Stopped. \(ReportText.count(waiting, "batch")) "
      + (waiting == 1 ? "waits" : "wait")
      + " in the outbox and will be forwarded at the next start."
  }

  private func fail(_ message: String) -> Int32 {
    if options.json {
      reporter.report(.stopped(message: message, staging: nil))
    } else {
      StandardOutput.error.line("browserdrop: \(TerminalText.escaped(message))")
    }
    return 1
  }

  private static func seconds(_ value: Double) -> String {
    value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
  }
}

/// The time a kiosk's quiet period is measured in: `Monotonic` seconds, as `SessionActivity`
/// notes them, and a way to wait some of them.
struct QuietClock: Sendable {
  var now: @Sendable () -> Double = { Monotonic.seconds() }
  var sleep: @Sendable (_ seconds: Double) async -> Void = { seconds in
    try? await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
  }
}

/// Set once, from any thread, when the kiosk should stop.
final class StopFlag: Sendable {
  private let flag = Mutex(false)

  var isSet: Bool { flag.withLock { $0 } }

  func set() {
    flag.withLock { $0 = true }
  }
}

import BrowserDrop
import BrowserDropForwarding
import BrowserDropSystem
import FoundationEssentials
import Glibc
import Synchronization

/// The default mode: serve until Enter, SIGINT or SIGTERM, then forward what arrived.
struct OneShotCommand {
  let options: CommandOptions
  let reporter: any Reporter

  /// Runs the session and returns the exit status.
  func run() async -> Int32 {
    let triggers: Triggers
    do {
      triggers = try Triggers(signals: [SIGINT, SIGTERM], readsStandardInput: true)
    } catch {
      return fail("Can't watch for Ctrl-C and stop signals: \(error.reason).")
    }
    let ownsStaging: Bool
    do {
      ownsStaging = try StagingLock.acquire(root: options.stagingRoot)
    } catch {
      return fail(StartFailure.message(for: error, options: options))
    }
    // Another browserdrop uses this staging folder: its session folders are not leftovers.
    if ownsStaging {
      BrowserDropServer.removeLeftovers(stagingRoot: options.stagingRoot)
    }
    let session: LiveSession
    do {
      session = try await LiveSession.start(
        configuration: options.serverConfiguration(port: options.port), reporter: reporter)
    } catch {
      return fail(StartFailure.message(for: error, options: options))
    }
    reporter.report(.listening(session.addresses))
    reporter.setHint("press Enter or Ctrl-C to finish")

    _ = await triggers.next()
    reporter.setHint("")
    reporter.report(.finishing)
    let folder: URL?
    do {
      folder = try await session.finish()
    } catch {
      return fail(StartFailure.message(for: error, options: options))
    }
    guard let folder else {
      reporter.report(.nothingArrived)
      return 0
    }
    let received = await session.server.receivedFiles
    let bytes = received.reduce(Int64(0)) { $0 + Int64($1.size) }
    guard let choice = options.destination else {
      let kept = KeptFolder.keep(folder, prefix: "received")
      reporter.report(.kept(staging: kept.path, files: received.count, bytes: bytes))
      return 0
    }
    return await forward(folder, to: choice, triggers: triggers)
  }

  private func forward(
    _ folder: URL, to choice: DestinationChoice, triggers: Triggers
  ) async -> Int32 {
    let subfolder = options.effectiveBatchFolder?.folderName(date: Date(), number: 1)
    let destination: any Destination
    do {
      destination = try choice.destination(subfolder: subfolder)
    } catch {
      let kept = KeptFolder.keep(folder, prefix: "unsent")
      reporter.report(
        .forwardFailed(message: ForwardRun.message(for: error, kiosk: false), staging: kept.path))
      return 1
    }
    reporter.setHint("Ctrl-C to stop forwarding (the files are kept)")
    let policy = options.collisionPolicy
    let reporter = self.reporter
    let delivery = Task {
      try await ForwardRun.run(folder: folder, to: destination, policy: policy, reporter: reporter)
    }
    let ending = FirstEnding()
    Task { ending.finish(.delivered(await delivery.result)) }
    let watcher = Task {
      while let trigger = await triggers.next() {
        guard case .signal(let number) = trigger else { continue }
        ending.noteSignal(number)
        delivery.cancel()
        // A libsmbclient call can't be interrupted; give the delivery a moment to stop at its
        // next chunk, then leave without it (the files are still all in the staged folder).
        try? await Task.sleep(for: .seconds(2))
        ending.finish(.stopped(number))
        return
      }
    }
    let result = await ending.value
    watcher.cancel()
    reporter.setHint("")
    if case .delivered(.success(let outcome)) = result {
      reporter.report(.forwarded(outcome.report, bytes: outcome.totalBytes))
      return 0
    }
    let kept = KeptFolder.keep(folder, prefix: "unsent")
    if let number = ending.stopSignal {
      reporter.report(.stopped(message: "Stopped forwarding.", staging: kept.path))
      return 128 + number
    }
    if case .delivered(.failure(let error)) = result {
      reporter.report(
        .forwardFailed(message: ForwardRun.message(for: error, kiosk: false), staging: kept.path))
    }
    return 1
  }

  private func fail(_ message: String) -> Int32 {
    if options.json {
      reporter.report(.stopped(message: message, staging: nil))
    } else {
      StandardOutput.error.line("browserdrop: \(TerminalText.escaped(message))")
    }
    return 1
  }
}

/// How forwarding in one-shot mode ended: whichever comes first of the delivery's result and a
/// stop requested by a signal.
final class FirstEnding: Sendable {
  enum Ending: Sendable {
    case delivered(Result<ForwardRun.Outcome, any Error>)
    case stopped(Int32)
  }

  private struct State {
    var ending: Ending?
    var waiter: CheckedContinuation<Ending, Never>?
    var stopSignal: Int32?
  }

  private let state = Mutex(State())

  /// The signal that asked to stop, if one did.
  var stopSignal: Int32? { state.withLock { $0.stopSignal } }

  func noteSignal(_ number: Int32) {
    state.withLock { $0.stopSignal = $0.stopSignal ?? number }
  }

  /// Records `ending` unless one was recorded already.
  func finish(_ ending: Ending) {
    let waiter = state.withLock { state -> CheckedContinuation<Ending, Never>? in
      guard state.ending == nil else { return nil }
      state.ending = ending
      defer { state.waiter = nil }
      return state.waiter
    }
    waiter?.resume(returning: ending)
  }

  /// The first ending, waiting for one.
  var value: Ending {
    get async {
      await withCheckedContinuation { continuation in
        let ready = state.withLock { state -> Ending? in
          if let ending = state.ending { return ending }
          state.waiter = continuation
          return nil
        }
        if let ready { continuation.resume(returning: ready) }
      }
    }
  }
}

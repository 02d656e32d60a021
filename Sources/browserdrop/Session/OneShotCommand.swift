import BrowserDrop
import BrowserDropForwarding
import Foundation

/// The default mode: serve until Enter, SIGINT or SIGTERM, then forward what arrived.
struct OneShotCommand {
  let options: CommandOptions
  let reporter: any Reporter

  /// Runs the session and returns the exit status.
  func run() async -> Int32 {
    let triggers = Triggers(signals: [SIGINT, SIGTERM], readsStandardInput: true)
    let ownsStaging: Bool
    do {
      ownsStaging = try StagingLock.acquire(root: options.stagingRoot)
    } catch {
      return fail("Can't use the staging folder \(options.stagingRoot.path): \(error.localizedDescription)")
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
      return fail(String(describing: error))
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
      return fail(String(describing: error))
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

  private func forward(_ folder: URL, to choice: DestinationChoice, triggers: Triggers) async -> Int32 {
    let subfolder = options.effectiveBatchFolder?.folderName(date: Date(), number: 1)
    let destination: any Destination
    do {
      destination = try choice.destination(subfolder: subfolder)
    } catch {
      let kept = KeptFolder.keep(folder, prefix: "unsent")
      reporter.report(.forwardFailed(message: ForwardRun.message(for: error), staging: kept.path))
      return 1
    }
    reporter.setHint("Ctrl-C to stop forwarding (the files are kept)")
    let policy = options.collisionPolicy
    let reporter = self.reporter
    let delivery = Task {
      try await ForwardRun.run(folder: folder, to: destination, policy: policy, reporter: reporter)
    }
    let watcher = Task { () -> Int32? in
      while let trigger = await triggers.next() {
        if case .signal(let number) = trigger {
          delivery.cancel()
          return number
        }
      }
      return nil
    }
    let result = await delivery.result
    watcher.cancel()
    let stopSignal = await watcher.value
    reporter.setHint("")
    switch result {
    case .success(let outcome):
      reporter.report(.forwarded(outcome.report, bytes: outcome.totalBytes))
      return 0
    case .failure(let error):
      let kept = KeptFolder.keep(folder, prefix: "unsent")
      if let stopSignal, error is CancellationError || !(error is ForwardFailure) {
        reporter.report(.stopped(message: "Stopped forwarding.", staging: kept.path))
        return 128 + stopSignal
      }
      reporter.report(.forwardFailed(message: ForwardRun.message(for: error), staging: kept.path))
      return 1
    }
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

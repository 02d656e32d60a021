import BrowserDropForwarding
import CBrowserDropLinux
import FoundationEssentials

/// Forwards outbox batches one at a time, oldest first. A failure keeps the batch (and those
/// behind it) in the outbox and tries again after a pause that doubles up to five minutes.
actor Courier {
  private let outbox: Outbox
  private let destination: DestinationChoice
  private let policy: CollisionPolicy
  private let reporter: any Reporter
  private let firstRetryDelay: Double
  private var queue: [Batch] = []
  private var worker: Task<Void, Never>?

  init(
    outbox: Outbox, destination: DestinationChoice, policy: CollisionPolicy,
    reporter: any Reporter, firstRetryDelay: Double = 2
  ) {
    self.outbox = outbox
    self.destination = destination
    self.policy = policy
    self.reporter = reporter
    self.firstRetryDelay = firstRetryDelay
  }

  /// Batches still in the outbox.
  var waiting: Int { queue.count }

  /// Adds batches to the end of the queue and makes sure they are being forwarded.
  func enqueue(_ batches: [Batch]) {
    queue += batches
    guard worker == nil, !queue.isEmpty else { return }
    worker = Task { await self.drain() }
  }

  /// Stops forwarding (a delivery in progress is cancelled; the next start finishes it without
  /// sending a file twice) and waits until it has stopped.
  func stop() async {
    let worker = self.worker
    worker?.cancel()
    await worker?.value
  }

  private func drain() async {
    var delay = firstRetryDelay
    while let batch = queue.first, !Task.isCancelled {
      do {
        try await forward(batch)
        queue.removeFirst()
        delay = firstRetryDelay
        // The delivery's scan and report of every file are gone: give that memory back, so a
        // kiosk's footprint follows its largest batch, not its lifetime.
        _ = try? await BlockingIO.run { cbd_release_free_memory() }
      } catch is CancellationError {
        break
      } catch {
        if Task.isCancelled { break }
        reporter.report(
          .forwardFailed(
            message: ForwardRun.message(for: error, kiosk: true), staging: batch.folder.path))
        reporter.report(.retrying(seconds: Int(delay.rounded(.up))))
        do { try await Task.sleep(for: .milliseconds(Int(delay * 1000))) } catch { break }
        delay = min(delay * 2, 300)
      }
    }
    worker = nil
  }

  /// Delivers `batch`, marks it done in the outbox and reports it.
  private func forward(_ batch: Batch) async throws {
    let target = try destination.destination(subfolder: batch.folderName)
    let outcome = try await ForwardRun.run(
      folder: batch.folder, to: target, policy: policy, reporter: reporter)
    let outbox = self.outbox
    try await BlockingIO.run { try outbox.complete(batch) }
    reporter.report(.forwarded(outcome.report, bytes: outcome.totalBytes))
  }
}

import BrowserDropForwarding
import CBrowserDropLinux
import FoundationEssentials

/// Forwards outbox batches one at a time, oldest first. A failure keeps the batch (and those
/// behind it) in the outbox and tries again after a pause drawn at random up to a cap that
/// doubles from 2 s to five minutes ("full jitter"), so kiosks sharing a share that failed
/// together don't retry in lockstep.
///
/// Every delivered file is read back and compared (`verify: .sha256`): kiosks may share a
/// destination folder, and only the content proves a file arrived as it was sent.
actor Courier {
  /// The retry pauses: the n-th consecutive failure waits a random time up to
  /// `min(cap, first · 2ⁿ⁻¹)`.
  struct Backoff: Sendable {
    var first: Double = 2
    var cap: Double = 300

    /// The pause after `failures` consecutive failures (from 1), in seconds: uniform in
    /// (0, ceiling], never below 0.1 s.
    func delay(
      after failures: Int, using random: inout some RandomNumberGenerator
    ) -> Double {
      max(0.1, Double.random(in: 0...ceiling(after: failures), using: &random))
    }

    /// The cap for the n-th consecutive failure: first, 2·first, 4·first… up to `cap`.
    func ceiling(after failures: Int) -> Double {
      min(cap, first * Double(1 << min(max(failures - 1, 0), 20)))
    }
  }

  private let outbox: Outbox
  private let destination: DestinationChoice
  private let policy: CollisionPolicy
  private let verify: Verification
  private let reporter: any Reporter
  private let backoff: Backoff
  private var queue: [Batch] = []
  private var worker: Task<Void, Never>?

  init(
    outbox: Outbox, destination: DestinationChoice, policy: CollisionPolicy,
    reporter: any Reporter, verify: Verification = .sha256, backoff: Backoff = Backoff()
  ) {
    self.outbox = outbox
    self.destination = destination
    self.policy = policy
    self.verify = verify
    self.reporter = reporter
    self.backoff = backoff
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
    var failures = 0
    var random = SystemRandomNumberGenerator()
    while let batch = queue.first, !Task.isCancelled {
      do {
        try await forward(batch)
        queue.removeFirst()
        failures = 0
        // The delivery's scan and report of every file are gone: give that memory back, so a
        // kiosk's footprint follows its largest batch, not its lifetime.
        _ = try? await BlockingIO.run { cbd_release_free_memory() }
      } catch is CancellationError {
        break
      } catch {
        if Task.isCancelled { break }
        failures += 1
        let delay = backoff.delay(after: failures, using: &random)
        reporter.report(
          .forwardFailed(
            message: ForwardRun.message(for: error, kiosk: true), staging: batch.folder.path))
        reporter.report(.retrying(seconds: Int(delay.rounded(.up))))
        do { try await Task.sleep(for: .milliseconds(Int(delay * 1000))) } catch { break }
      }
    }
    worker = nil
  }

  /// Delivers `batch`, marks it done in the outbox and reports it.
  private func forward(_ batch: Batch) async throws {
    let target = try destination.destination(subfolder: batch.folderName)
    let outcome = try await ForwardRun.run(
      folder: batch.folder, to: target, policy: policy, verify: verify, reporter: reporter)
    let outbox = self.outbox
    try await BlockingIO.run { try outbox.complete(batch) }
    reporter.report(.forwarded(outcome.report, bytes: outcome.totalBytes))
  }
}

import BrowserDropForwarding
import FoundationEssentials
import Synchronization

/// Forwards one folder and tells the reporter how it goes, at most five progress reports a
/// second (and always the last).
enum ForwardRun {
  /// What a successful delivery did, and how many bytes the folder held.
  struct Outcome: Sendable {
    let report: ForwardReport
    let totalBytes: Int64
  }

  /// Forwards `folder` to `destination`; the folder is removed once everything arrived.
  /// Throws `ForwardFailure` or `CancellationError`.
  static func run(
    folder: URL, to destination: any Destination, policy: CollisionPolicy,
    reporter: any Reporter
  ) async throws -> Outcome {
    let throttle = Throttle()
    reporter.report(.forwardStarted(destination: destination.description))
    let report = try await Forwarder().forward(
      folder: folder, to: destination, policy: policy
    ) { progress in
      if throttle.shouldReport(progress) { reporter.report(.forwardProgress(progress)) }
    }
    return Outcome(report: report, totalBytes: throttle.totalBytes)
  }

  /// The message for an error thrown by `run`.
  static func message(for error: any Error) -> String {
    if let failure = error as? ForwardFailure { return failure.description }
    return String(describing: error)
  }

  private final class Throttle: Sendable {
    private struct State {
      var last = -Double.infinity
      var totalBytes: Int64 = 0
    }
    private let state = Mutex(State())

    var totalBytes: Int64 { state.withLock { $0.totalBytes } }

    func shouldReport(_ progress: ForwardProgress) -> Bool {
      let now = Monotonic.seconds()
      return state.withLock { state in
        state.totalBytes = progress.totalBytes
        let done = progress.completedFiles == progress.totalFiles
        guard done || now - state.last >= 0.2 else { return false }
        state.last = now
        return true
      }
    }
  }
}

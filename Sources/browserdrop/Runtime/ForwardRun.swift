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

  /// Forwards `folder` to `destination`; the folder is removed once everything arrived (and,
  /// with `verify: .sha256`, read back and compared). Throws `ForwardFailure` or
  /// `CancellationError`.
  static func run(
    folder: URL, to destination: any Destination, policy: CollisionPolicy,
    verify: Verification = .size, reporter: any Reporter
  ) async throws -> Outcome {
    let throttle = Throttle()
    reporter.report(.forwardStarted(destination: destination.description))
    let report = try await Forwarder().forward(
      folder: folder, to: destination, policy: policy, verify: verify
    ) { progress in
      if throttle.shouldReport(progress) { reporter.report(.forwardProgress(progress)) }
    }
    return Outcome(report: report, totalBytes: throttle.totalBytes)
  }

  /// The message for an error thrown by `run`: the library's account of what went wrong, with
  /// its advice (written for an app with buttons, "forward again") replaced by what a user of
  /// this command can do. In kiosk mode the batch stays in the outbox and is tried again by
  /// itself; in one-shot mode the reporter prints the kept folder's path after the message.
  static func message(for error: any Error, kiosk: Bool) -> String {
    guard let failure = error as? ForwardFailure else { return String(describing: error) }
    guard let advice = advice(for: failure.kind, kiosk: kiosk) else { return failure.description }
    return failure.problem + " " + advice
  }

  /// The command's advice for `kind`, where the library's doesn't fit the command.
  private static func advice(for kind: ForwardFailure.Kind, kiosk: Bool) -> String? {
    let retried = "The batch stays in the outbox and is sent again by itself."
    switch kind {
    case .nameTaken:
      return "Use --on-conflict rename or replace, or move the existing item away"
        + (kiosk ? "; the batch is sent again by itself." : ".")
    case .nameNotAllowed:
      return kiosk
        ? "Rename it in the batch's folder in the outbox; the next try sends it."
        : "Rename it in the kept folder and copy the files there yourself."
    case .destinationFull:
      return "Free up space there"
        + (kiosk ? "; the batch stays in the outbox and is sent again." : ".")
    case .connectionLost:
      return kiosk
        ? "\(retried) Files that arrived won't be sent twice." : "Files that arrived stay there."
    case .verificationFailed:
      return kiosk ? retried : "Copy it from the kept folder."
    case .earlierRequestPending:
      return kiosk ? retried : nil
    case .wrongCredentials:
      return "Check the user in --to and the password (BROWSERDROP_SMB_PASSWORD, "
        + "--smb-password-file or the smb-password credential)."
    case .folderBusy:
      return kiosk
        ? "The batch stays in the outbox and is sent again once that delivery has ended."
        : "Wait for the other delivery to finish, then forward again."
    case .smbUnavailable:
      return "Install libsmbclient" + (kiosk ? "; the batch is sent again by itself." : ".")
    case .other:
      return "Check the destination" + (kiosk ? "; the batch is sent again by itself." : ".")
    default:
      return nil
    }
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

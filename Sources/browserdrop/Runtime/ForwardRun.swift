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

  /// The message for an error thrown by `run`: the library's sentence, with its advice (written
  /// for an app with buttons, "forward again") replaced by what a user of this command can do.
  /// In kiosk mode the batch stays in the outbox and is tried again by itself; in one-shot mode
  /// the reporter prints the kept folder's path after the message.
  static func message(for error: any Error, kiosk: Bool) -> String {
    guard let failure = error as? ForwardFailure else { return String(describing: error) }
    let text = failure.description
    guard let (libraryAdvice, advice) = advice(for: failure.kind, kiosk: kiosk),
      text.hasSuffix(libraryAdvice)
    else { return text }
    return text.dropLast(libraryAdvice.count) + advice
  }

  /// The library's closing sentence for `kind`, and the command's own.
  private static func advice(
    for kind: ForwardFailure.Kind, kiosk: Bool
  ) -> (library: String, command: String)? {
    let retried = "The batch stays in the outbox and is sent again by itself."
    switch kind {
    case .nameTaken:
      return (
        "Choose Keep Both or Replace, or move the existing item.",
        "Use --on-conflict rename or replace, or move the existing item away"
          + (kiosk ? "; the batch is sent again by itself." : ".")
      )
    case .nameNotAllowed:
      return (
        "Rename it, then forward again.",
        kiosk
          ? "Rename it in the batch's folder in the outbox; the next try sends it."
          : "Rename it in the kept folder and copy the files there yourself."
      )
    case .destinationFull:
      return (
        "Free up space there, then forward again.",
        "Free up space there" + (kiosk ? "; the batch stays in the outbox and is sent again." : ".")
      )
    case .connectionLost:
      return (
        "Forward again to finish; files that arrived won't be sent twice.",
        kiosk
          ? "\(retried) Files that arrived won't be sent twice." : "Files that arrived stay there."
      )
    case .verificationFailed:
      return ("Forward again to resend it.", kiosk ? retried : "Copy it from the kept folder.")
    case .wrongCredentials:
      return (
        "Check them and try again.",
        "Check the user in --to and the password (BROWSERDROP_SMB_PASSWORD, "
          + "--smb-password-file or the smb-password credential)."
      )
    case .smbUnavailable:
      return (
        "Install libsmbclient, then forward again.",
        "Install libsmbclient" + (kiosk ? "; the batch is sent again by itself." : ".")
      )
    case .other:
      return (
        "Try again, or check the destination.",
        "Check the destination" + (kiosk ? "; the batch is sent again by itself." : ".")
      )
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

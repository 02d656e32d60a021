import BrowserDropSystem
import Glibc

/// Why an admitted upload did not complete, and what (if anything) to answer.
struct BodyFailure: Error {
  var reason: FailureReason
  /// What to answer, when the peer can still hear it.
  var refusal: Refusal?
  /// Body bytes the peer has yet to send: a refusal made while the body was arriving is
  /// answered at once, and the rest of the body is then read and thrown away, so that a
  /// client that sends everything before it reads still gets the answer.
  var unreadBody = 0
  /// A resumable upload that was cut off and kept: the bytes now durable. The upload is paused,
  /// not ended.
  var keptOffset: Int?

  /// Whether a resumable upload that failed this way is kept to be resumed: the peer went away
  /// or went quiet, or the session stopped listening. A refusal or a write failure is final.
  var isResumable: Bool {
    switch reason {
    case .connectionLost, .timedOut, .cancelled: refusal == nil
    default: false
    }
  }

  static let connectionLost = BodyFailure(reason: .connectionLost)
  static let cancelled = BodyFailure(reason: .cancelled)

  /// The partial file could not be made.
  static func creating(_ error: SystemError) -> BodyFailure {
    BodyFailure(
      reason: .writeFailed(error.reason),
      refusal: Refusal(.writeFailed, "The file couldn't be created: \(error.reason)."))
  }

  /// The body stopped arriving or could not be written: a full disk is told apart from other
  /// write failures, a deadline from a cancellation and from a lost peer.
  static func streaming(_ error: any Error) -> BodyFailure {
    switch error {
    case let error as SystemError where lostPeer.contains(error.code):
      // Only a socket fails this way: the peer went away (a reset, a network gone).
      .connectionLost
    case let error as SystemError where error.code == ENOSPC || error.code == EDQUOT:
      BodyFailure(
        reason: .insufficientStorage,
        refusal: Refusal(.writeFailed, "The disk filled up while the file was written."))
    case let error as SystemError:
      BodyFailure(
        reason: .writeFailed(error.reason),
        refusal: Refusal(.writeFailed, "The file couldn't be written: \(error.reason)."))
    case Reactor.WaitError.timedOut: BodyFailure(reason: .timedOut)
    // The event loop failed under the connection: like a suspend, not a quiet sender, so the
    // page sends the file again once the host resumes.
    case Reactor.WaitError.loopEnded: .cancelled
    case is CancellationError: .cancelled
    default: .connectionLost
    }
  }

  /// `fdatasync` failed: the bytes may not be on the disk.
  static func flushing(_ error: SystemError) -> BodyFailure {
    BodyFailure(
      reason: .writeFailed(error.reason),
      refusal: Refusal(.writeFailed, "The file couldn't be flushed to disk: \(error.reason)."))
  }

  private static let lostPeer: Set<Int32> = [
    ECONNRESET, ECONNABORTED, ETIMEDOUT, EHOSTUNREACH, ENETUNREACH, ENETDOWN,
  ]

  /// Inspection refused the content; `unreadBody` bytes are still to come.
  static func refusedContent(_ message: String, unreadBody: Int = 0) -> BodyFailure {
    BodyFailure(
      reason: .unsupportedType(message), refusal: Refusal(.unsupportedType, message),
      unreadBody: unreadBody)
  }
}

/// Something that happened during a session, delivered in order through `BrowserDropServer.events`.
public enum Event: Sendable, Hashable {
  /// An upload passed every check and the server started receiving its body: the event comes
  /// as the body is admitted, right before its `100 Continue` (when the client asked for one)
  /// and its first byte is read.
  case uploadStarted(Upload)
  /// An upload arrived complete and was stored.
  case uploadFinished(ReceivedFile)
  /// An upload that had started did not complete; nothing of it was kept. (A resumable upload
  /// still paused when the session ends gets it too, `.cancelled`, though with
  /// `ResumableUploads.Scope.stagingRoot` its bytes stay for a later session: see `PauseEvent`.)
  case uploadFailed(Upload, FailureReason)
  /// The machine's network addresses changed; the new list replaces the old one.
  case addressesChanged([Address])
  /// The listener was lost (for example its interface went away); call `resume()` to listen again.
  case interrupted
}

/// Why a started upload did not complete.
public enum FailureReason: Sendable, Hashable, CustomStringConvertible {
  /// The client closed the connection before sending the whole body.
  case connectionLost
  /// The client sent nothing for `idleTimeout`.
  case timedOut
  /// Another upload took the name, in another form, while this one was arriving.
  case pathConflict
  /// The content contradicts the file's extension or the content policy.
  case unsupportedType(String)
  /// The volume filled up while the body was written.
  case insufficientStorage
  /// The file could not be written; the text says why.
  case writeFailed(String)
  /// The session was suspended, finished or cancelled while the body was arriving.
  case cancelled

  /// A short English sentence describing the reason.
  public var description: String {
    switch self {
    case .connectionLost: "The connection was lost before the whole file arrived."
    case .timedOut: "The sender went quiet for too long."
    case .pathConflict: "Another file or folder in this session already has that name."
    case .unsupportedType(let detail): detail
    case .insufficientStorage: "There is not enough free space."
    case .writeFailed(let detail): "The file could not be written: \(detail)"
    case .cancelled: "The session stopped while the file was arriving."
    }
  }
}

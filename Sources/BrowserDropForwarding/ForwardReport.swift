/// What a finished delivery did.
public struct ForwardReport: Sendable, Equatable {
  /// A file and where it ended up.
  public struct Delivered: Sendable, Equatable {
    /// The path inside the forwarded folder, `/`-separated.
    public let source: String
    /// The path under the destination, `/`-separated.
    public let destination: String
  }

  /// An item that arrived under another name than it had.
  public struct Rename: Sendable, Equatable {
    /// Why the name changed.
    public enum Reason: Sendable, Equatable {
      /// The name was taken by a file (``CollisionPolicy/rename``).
      case nameTaken
      /// A file stood where a folder was to go, or the reverse.
      case kindConflict
      /// The destination cannot hold the name (`: * ? " < > |`, a trailing dot or space, or a
      /// reserved name such as `CON`).
      case nameNotAllowed
    }

    /// The path inside the forwarded folder.
    public let source: String
    /// The path it got under the destination.
    public let destination: String
    /// Why.
    public let reason: Reason
  }

  /// The destination's description (never with a password).
  public let destination: String
  /// Every file, in delivery order, including ones found delivered by an interrupted earlier run.
  public let files: [Delivered]
  /// Every renamed file or folder.
  public let renames: [Rename]
  /// Files an earlier, interrupted run had already delivered; they were not sent again.
  public let resumedFiles: Int
  /// Bytes sent by this run.
  public let bytesSent: Int64
}

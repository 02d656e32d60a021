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

  /// A name at the destination where a claim may have been left by an interrupted claim or move
  /// of an earlier attempt of this delivery (SMB only), and is still there: an empty file, or
  /// one holding the single line `browserdrop claim <attempt id>`.
  ///
  /// On SMB a final name is claimed with an exclusive create before the file is moved onto it
  /// (docs/forwarding.md, "The claim window"). When the create's answer was lost, or the
  /// delivery was stopped between the create and its record, nothing proves whether the empty
  /// file at that name is this delivery's claim or another writer's file (another kiosk's
  /// claim, or an empty file it delivered), so it is never removed: the file went to the next
  /// free name, and the name is listed here for an operator to look at. An empty file that
  /// someone else delivered at a name an interrupted attempt had announced is listed too. A
  /// claim holding the attempt's own line is listed when the connection that sent a move over
  /// it may still be open on the server (its delete of the claim could still come).
  public struct PossibleLeftover: Sendable, Equatable {
    /// Why the name can't be proven either way.
    public enum Reason: Sendable, Equatable {
      /// The claim was sent and its answer never came back (the claim child ended first, the
      /// request timed out, or the connection dropped): the server may have made the create.
      case claimAnswerLost
      /// The delivery stopped after announcing the name (`installing`) and before any record
      /// of the claim: the process, or its claim child, was killed there, or no claim child
      /// could be used and the claim was made in the process.
      case claimNotRecorded
    }

    /// The path inside the forwarded folder of the file whose claim it may be, `/`-separated.
    public let source: String
    /// The claim's path under the destination, `/`-separated.
    public let path: String
    /// Why it may be a leftover.
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
  /// Claims that interrupted earlier attempts of this delivery may have left behind at a name
  /// (SMB claims that nothing proves removable), checked when this run resumed them; never
  /// removed. Empty for a local folder, which needs no claims.
  public let possibleLeftovers: [PossibleLeftover]
}

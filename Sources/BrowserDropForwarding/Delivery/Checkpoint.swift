/// A point of a delivery where a test can end it as a crash there would (a test seam): the
/// delivery throws ``SimulatedCrash`` and nothing after that point runs, no cleanup either.
enum Checkpoint: Sendable, Equatable {
  /// The manifest holds `installing` for a final name; the name has not been checked yet.
  case installingRecorded
  /// SMB: the server has created the claim at the final name, and this process has not
  /// recorded it (a kill between the server's create and the `claimed` record).
  case claimCreated
  /// SMB: the claim child has created the claim and recorded it (`claimed`, no id yet), and
  /// ``Forwarder/afterClaim`` has run; the claim's token is not checked yet.
  case claimRecorded
  /// The file is at its final name; `delivered` is not recorded yet.
  case installed
  /// Not a crash: right after the `installing` record, the install fails with
  /// `connectionLost` (as a lost claim answer would end it), so the attempt cleans up.
  case installFails
  /// Not a crash: the file is at its final name, and the check after the install fails with
  /// `connectionLost` (as a connection that drops while the file is read back ends it).
  case checkFails
  /// Not a crash (SMB): the move over the claim ends with ``MoveAnswerLost`` before it is sent,
  /// the claim left in place, as when libsmbclient's delete of it was never carried out.
  case moveAnswerLostBeforeMove
  /// Not a crash (SMB): the move over the claim fails with `connectionLost` before it is sent,
  /// as when libsmbclient's first rename is refused without `EEXIST` (it then deletes nothing).
  case moveRefused
  /// Not a crash (SMB): the move over the claim is carried out, and then ends with
  /// ``MoveAnswerLost``, as when the connection fails after libsmbclient's second rename.
  case moveAnswerLostAfterMove
  /// A resume has found what an earlier attempt left to remove, and the next attempt is not
  /// recorded yet.
  case beforeNextAttempt
  /// SMB: the claim and its id are recorded and the move over it is about to be sent (a kill
  /// in the move window, before libsmbclient's first request).
  case killedBeforeMove
  /// SMB: the move onto the first name ends as not installed (the temporary file left in
  /// place), the attempt claims the next name, and it is killed before moving onto that one.
  case killedBeforeSecondMove
}

/// A claim that was sent and whose answer never came (the claim child ended first, the
/// request timed out, the connection dropped): the create may have happened. Thrown by
/// ``DestinationFileSystem/claim(_:recording:in:trial:)``; the delivery records `unanswered`
/// and fails with `failure`.
struct ClaimAnswerLost: Error {
  let failure: ForwardFailure
}

/// The move over a claim failed in a way that leaves it open whether libsmbclient deleted the
/// claim (and whether its second rename went through): thrown by
/// ``DestinationFileSystem/install(_:at:replacing:claim:)``. The delivery fails with `failure`
/// and records nothing more: its `claimed` record says a move may have been sent.
struct MoveAnswerLost: Error {
  let failure: ForwardFailure
}

/// Thrown when a delivery reaches its ``Checkpoint``; no cleanup runs on its way out.
struct SimulatedCrash: Error {}

/// A point of a delivery where a test can end it as a crash there would (a test seam): the
/// delivery throws ``SimulatedCrash`` and nothing after that point runs, no cleanup either.
enum Checkpoint: Sendable, Equatable {
  /// The manifest holds `installing` for a final name; the name has not been checked yet.
  case installingRecorded
  /// SMB: the server has created the claim at the final name, and this process has not
  /// recorded it (a kill between the server's create and the `claimed` record).
  case claimCreated
  /// The file is at its final name; `delivered` is not recorded yet.
  case installed
  /// Not a crash: right after the `installing` record, the install fails with
  /// `connectionLost` (as a lost claim answer would end it), so the attempt cleans up.
  case installFails
}

/// A claim that was sent and whose answer never came (the claim child ended first, the
/// request timed out, the connection dropped): the create may have happened. Thrown by
/// ``DestinationFileSystem/claim(_:recording:in:trial:)``; the delivery records `unanswered`
/// and fails with `failure`.
struct ClaimAnswerLost: Error {
  let failure: ForwardFailure
}

/// Thrown when a delivery reaches its ``Checkpoint``; no cleanup runs on its way out.
struct SimulatedCrash: Error {}

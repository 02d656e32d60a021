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
}

/// Thrown when a delivery reaches its ``Checkpoint``; no cleanup runs on its way out.
struct SimulatedCrash: Error {}

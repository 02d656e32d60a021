/// A point of a delivery where a test can end it as a crash there would (a test seam): the
/// delivery throws ``SimulatedCrash`` and nothing after that point runs, no cleanup either.
enum Checkpoint: Sendable, Equatable {
  /// The manifest holds `installing` for a final name; the name has not been checked yet.
  case installingRecorded
}

/// Thrown when a delivery reaches its ``Checkpoint``; no cleanup runs on its way out.
struct SimulatedCrash: Error {}

import Glibc

/// The steps of storing a resumable upload where a crash test has the process kill itself
/// (`SIGKILL`, so nothing after that point runs, not even cleanup), chosen by the environment
/// variable `BROWSERDROP_TEST_CRASH_POINT` (the raw values below). A test seam: the real
/// `browserdrop --kiosk` honours it, so the crash order is proved on the real command, not on a
/// copy of its logic. Unset (always, outside tests), `reach` does nothing.
enum ResumeCrashPoint: String, Sendable {
  /// Every byte of the body is written and flushed; the file is still in the resumable store.
  case received = "resume-received"
  /// The file has its name in the session folder; the folder is not yet flushed and no answer
  /// has been sent (the client's 201 is lost).
  case stored = "resume-stored"

  /// The point chosen for this process, read once.
  static let chosen: ResumeCrashPoint? = getenv("BROWSERDROP_TEST_CRASH_POINT").flatMap {
    ResumeCrashPoint(rawValue: String(cString: $0))
  }

  /// Kills the process when `point` is the chosen one.
  static func reach(_ point: ResumeCrashPoint) {
    guard chosen == point else { return }
    kill(getpid(), SIGKILL)
  }
}

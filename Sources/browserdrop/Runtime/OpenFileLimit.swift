import Glibc

/// The process's limit on open descriptors, raised for a server's needs.
///
/// systemd and most shells start programs with a soft `RLIMIT_NOFILE` of 1,024 (kept low for
/// programs that still use `select`) and a much higher hard limit, leaving it to a program that
/// needs more to raise its own. `browserdrop` needs more with a high `--max-connections`: each
/// connection holds a socket and, while a file arrives, that file. And running out is worse for a
/// Swift program on Linux than a refused `accept4`: libdispatch's thread-pool monitor opens
/// `/proc/<tid>/stat` once a second while work waits for a thread, and ends the process when that
/// open fails.
enum OpenFileLimit {
  /// The most the soft limit is raised to: well past what 64 (or thousands of) connections
  /// need, without making every "close all descriptors" loop in a library walk a million numbers.
  static let ceiling: rlim_t = 65_536

  /// Raises the soft limit towards the hard limit (at most `ceiling`); never lowers it. A
  /// failure leaves the limit as it was, and the command starts all the same: it ran with that
  /// limit before, and with the defaults (64 connections) it stays far below it.
  static func raise() {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
    let wanted = min(limit.rlim_max, ceiling)
    guard limit.rlim_cur < wanted else { return }
    limit.rlim_cur = wanted
    _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
  }
}

import BrowserDrop
import BrowserDropSystem
import CSystemdLoader
import Glibc
import Synchronization

/// systemd's notify protocol through libsystemd's `sd_notify`: `READY=1` once listening,
/// `STATUS=` with a short line kept current, `WATCHDOG=1` from the event loop's own thread at
/// half of `WATCHDOG_USEC`, `STOPPING=1` at shutdown.
///
/// Inactive (and libsystemd never loaded) unless `NOTIFY_SOCKET` is set, which systemd does for
/// a `Type=notify` unit. The watchdog pings come from a timer the event loop runs between its
/// waits, so they stop when the loop is wedged, not merely when the process is gone: that is
/// what lets `WatchdogSec=` restart a kiosk whose loop no longer serves uploads.
final class SystemdNotifier: Sendable {
  /// Whether `NOTIFY_SOCKET` was set and libsystemd loaded.
  let isActive: Bool
  /// The watchdog period systemd asked for, when it asked.
  let watchdogPeriod: Duration?
  private let lastStatus = Mutex<String?>(nil)

  /// Loads libsystemd when `environment` has `NOTIFY_SOCKET`. `warn` gets one line when it is
  /// set but libsystemd can't be loaded (the kiosk then runs without notifying).
  init(environment: [String: String], warn: (String) -> Void) {
    guard let socket = environment["NOTIFY_SOCKET"], !socket.isEmpty else {
      (isActive, watchdogPeriod) = (false, nil)
      return
    }
    var error = [CChar](repeating: 0, count: 256)
    guard cbd_sd_load("libsystemd.so.0", &error, error.count) == 0 else {
      let reason = String(
        decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
      warn(
        "NOTIFY_SOCKET is set but libsystemd can't be loaded (\(reason)); not notifying systemd.")
      (isActive, watchdogPeriod) = (false, nil)
      return
    }
    isActive = true
    var usec: UInt64 = 0
    watchdogPeriod = cbd_sd_watchdog_enabled(0, &usec) > 0 && usec > 0 ? .microseconds(usec) : nil
  }

  /// `READY=1` with the first status line, and the watchdog's timer on the event loop.
  /// `tick` runs on the loop too, at every ping, with the loop's lateness.
  func ready(status: String) {
    guard isActive else { return }
    lastStatus.withLock { $0 = status }
    send("READY=1\nSTATUS=\(status)")
    if let watchdogPeriod {
      // Half the period, as sd_watchdog_enabled(3) advises: one late ping is not yet a restart.
      EventLoopTimer.every(watchdogPeriod / 2) { [self] _ in send("WATCHDOG=1") }
    }
  }

  /// `STATUS=` when the line changed.
  func status(_ line: String) {
    guard isActive else { return }
    let changed = lastStatus.withLock { last in
      defer { last = line }
      return last != line
    }
    if changed { send("STATUS=\(line)") }
  }

  /// `STOPPING=1`: systemd shows the unit as deactivating while the kiosk closes its batch.
  func stopping(status: String) {
    guard isActive else { return }
    send("STOPPING=1\nSTATUS=\(status)")
  }

  /// One datagram to `NOTIFY_SOCKET`; a failure is not the kiosk's business (systemd may be
  /// restarting), so it is dropped.
  private func send(_ state: String) {
    _ = cbd_sd_notify(0, state)
  }
}

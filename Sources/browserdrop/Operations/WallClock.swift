import Glibc

/// The time of day, for metrics (seconds since 1970) and the `STATUS=` line (local `HH:MM`).
enum WallClock {
  /// Seconds since 1970 (`clock_gettime(CLOCK_REALTIME)`).
  static func now() -> Double {
    var spec = timespec()
    clock_gettime(CLOCK_REALTIME, &spec)
    return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
  }

  /// `seconds` as the local time of day, `12:03` (`localtime_r`).
  static func hoursAndMinutes(_ seconds: Double) -> String {
    var time = time_t(seconds)
    var parts = tm()
    guard localtime_r(&time, &parts) != nil else { return "?" }
    let hour = parts.tm_hour < 10 ? "0\(parts.tm_hour)" : "\(parts.tm_hour)"
    let minute = parts.tm_min < 10 ? "0\(parts.tm_min)" : "\(parts.tm_min)"
    return "\(hour):\(minute)"
  }
}

/// `/metrics` in the Prometheus text exposition format (version 0.0.4): one `# HELP` and
/// `# TYPE` per family, then its samples. Pure, so a test reads it without a socket.
enum MetricsText {
  /// The media type Prometheus expects for this format.
  static let contentType = "text/plain; version=0.0.4; charset=utf-8"

  /// The exposition of `snapshot`, `now` being monotonic seconds (for the loop's lag).
  static func render(_ snapshot: OperationsState.Snapshot, now: Double) -> String {
    var text = ""
    func family(_ name: String, _ type: String, _ help: String, _ samples: [(String, Double)]) {
      text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
      for (labels, value) in samples { text += "\(name)\(labels) \(number(value))\n" }
    }
    family(
      "browserdrop_uploads_total", "counter",
      "Uploads that ended, by outcome: stored, or why the file was not kept.",
      OperationsState.uploadOutcomes.map {
        ("{outcome=\"\($0)\"}", Double(snapshot.uploads[$0, default: 0]))
      })
    family(
      "browserdrop_received_bytes_total", "counter", "Bytes of the files stored.",
      [("", Double(snapshot.receivedBytes))])
    family(
      "browserdrop_uploads_in_flight", "gauge", "Uploads being received now.",
      [("", Double(snapshot.inFlight))])
    family(
      "browserdrop_uploads_paused", "gauge",
      "Uploads cut off and kept, waiting for their client to resume them.",
      [("", Double(snapshot.paused.count))])
    if let free = snapshot.stagingFreeBytes {
      family(
        "browserdrop_staging_free_bytes", "gauge",
        "Free bytes on the staging volume for browserdrop (statvfs f_bavail), at the last probe.",
        [("", Double(free))])
    }
    family(
      "browserdrop_outbox_batches", "gauge",
      "Kiosk: batches in the outbox waiting to be forwarded (the one in progress included).",
      [("", Double(snapshot.outboxBatches))])
    family(
      "browserdrop_forwards_total", "counter", "Forwards that ended, by outcome: ok or failed.",
      ["ok", "failed"].map { ("{outcome=\"\($0)\"}", Double(snapshot.forwards[$0, default: 0])) })
    family(
      "browserdrop_forward_possible_leftovers_total", "counter",
      "Empty files found at a name an interrupted SMB claim may have made, left in place "
        + "because nothing proves this kiosk made them (each is named in the forward's report; "
        + "check before removing).",
      [("", Double(snapshot.possibleLeftovers))])
    family(
      "browserdrop_last_forward_success_timestamp_seconds", "gauge",
      "When the last forward that succeeded ended, in seconds since 1970 (0: none yet).",
      [("", snapshot.lastForwardSuccess ?? 0)])
    if let reachable = snapshot.destinationReachable {
      family(
        "browserdrop_destination_reachable", "gauge",
        "Whether the destination answered the last probe (SMB: a TCP connection to its port; "
          + "a folder: it or its parent is writable), 1 or 0.",
        [("", reachable ? 1 : 0)])
    }
    family(
      "browserdrop_listening", "gauge", "Whether the upload listener is up, 1 or 0.",
      [("", snapshot.listening ? 1 : 0)])
    family(
      "browserdrop_event_loop_lag_seconds", "gauge",
      "How late the event loop ran its periodic timer; grows while the loop is blocked.",
      [("", snapshot.loopLag(now: now))])
    return text
  }

  /// Integers without a fraction, others as Swift prints them (Prometheus reads both).
  private static func number(_ value: Double) -> String {
    if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
    return "\(value)"
  }
}

import BrowserDrop
import BrowserDropForwarding
import Synchronization

/// What an operator watches, counted from the command's reports and the probes: the numbers
/// behind `/metrics`, `/healthz` and systemd's `STATUS=` line. One lock, held only to copy or
/// bump a few numbers, so the event loop (which reports server events) never waits on it long.
final class OperationsState: Sendable {
  /// A copy of everything, taken at once.
  struct Snapshot: Sendable, Equatable {
    /// Uploads that ended, by outcome (`stored`, or a `FailureReason` as snake case).
    var uploads: [String: Int] = [:]
    /// Bytes of the files stored.
    var receivedBytes: Int64 = 0
    /// Uploads being received now (a paused one is not).
    var inFlight = 0
    /// Uploads cut off and kept, waiting for their client to resume them.
    var paused: Set<UInt64> = []
    /// Batches in the outbox (kiosk), the one being forwarded included.
    var outboxBatches = 0
    /// Forwards that ended, by outcome (`ok`, `failed`).
    var forwards: [String: Int] = [:]
    /// Empty files successful forwards reported as possibly left by an interrupted claim.
    var possibleLeftovers = 0
    /// Seconds since 1970 of the last forward that succeeded.
    var lastForwardSuccess: Double?
    /// Seconds since 1970 when the last forward ended, however it ended.
    var lastForwardEnded: Double?
    /// The failure of the last forward, while it is the last one; `nil` after a success.
    var lastForwardFailure: String?
    /// Whether the upload listener is up.
    var listening = false
    /// Free bytes on the staging volume at the last probe.
    var stagingFreeBytes: Int64?
    /// Whether the destination answered the last probe.
    var destinationReachable: Bool?
    /// How late the event loop ran its last timer, in seconds.
    var loopLag: Double = 0
    /// When the loop's timer last ran (monotonic seconds), and how often it should.
    var lastLoopTick: Double?
    var loopTickInterval: Double = 1
  }

  private let state = Mutex(Snapshot())

  /// Everything, at once.
  var snapshot: Snapshot { state.withLock { $0 } }

  /// Counts what a report says. Returns whether the `STATUS=` line's inputs changed.
  @discardableResult
  func note(_ report: Report) -> Bool {
    state.withLock { state in
      switch report {
      case .listening:
        state.listening = true
      case .server(let event):
        switch event {
        case .uploadStarted:
          state.inFlight += 1
          // Uploads arrive only through a listener that is up (again, after `.interrupted`).
          if !state.listening {
            state.listening = true
            return true
          }
        case .uploadFinished(let file):
          state.inFlight = max(0, state.inFlight - 1)
          state.uploads["stored", default: 0] += 1
          state.receivedBytes += Int64(file.size)
        case .uploadFailed(let upload, let reason):
          // A paused upload that expires (or is cancelled at the end) was no longer in flight.
          if state.paused.remove(upload.id) == nil { state.inFlight = max(0, state.inFlight - 1) }
          state.uploads[Self.outcome(of: reason), default: 0] += 1
        case .interrupted:
          state.listening = false
          return true
        case .addressesChanged:
          return false
        }
        return false
      case .pause(.paused(let upload, _)):
        if state.paused.insert(upload.id).inserted { state.inFlight = max(0, state.inFlight - 1) }
        return false
      case .pause(.resumed(let upload, _)):
        if state.paused.remove(upload.id) != nil { state.inFlight += 1 }
        return false
      case .batchClosed:
        state.outboxBatches += 1
      case .forwarded(let forward, _):
        state.outboxBatches = max(0, state.outboxBatches - 1)
        state.forwards["ok", default: 0] += 1
        state.possibleLeftovers += forward.possibleLeftovers.count
        state.lastForwardSuccess = WallClock.now()
        state.lastForwardEnded = state.lastForwardSuccess
        state.lastForwardFailure = nil
        state.destinationReachable = true
      case .forwardFailed(let message, _):
        state.forwards["failed", default: 0] += 1
        state.lastForwardFailure = message
        state.lastForwardEnded = WallClock.now()
      default:
        return false
      }
      return true
    }
  }

  /// Kiosk: `count` batches were found in the outbox at start.
  func noteRecoveredBatches(_ count: Int) {
    state.withLock { $0.outboxBatches += count }
  }

  /// A probe's readings; `nil` leaves a reading as it was.
  func noteProbe(stagingFreeBytes: Int64?, destinationReachable: Bool?) {
    state.withLock { state in
      if let stagingFreeBytes { state.stagingFreeBytes = stagingFreeBytes }
      if let destinationReachable { state.destinationReachable = destinationReachable }
    }
  }

  /// The loop's timer ran `late` seconds after it was due, at monotonic time `now`.
  func noteLoopTick(late: Double, now: Double, interval: Double) {
    state.withLock { state in
      state.loopLag = late
      state.lastLoopTick = now
      state.loopTickInterval = interval
    }
  }

  /// The outcome label of an upload that failed.
  static func outcome(of reason: FailureReason) -> String {
    switch reason {
    case .connectionLost: "connection_lost"
    case .timedOut: "timed_out"
    case .pathConflict: "path_conflict"
    case .unsupportedType: "unsupported_type"
    case .insufficientStorage: "insufficient_storage"
    case .writeFailed: "write_failed"
    case .cancelled: "cancelled"
    }
  }

  /// Every upload outcome label, so a scrape shows each from the start (at 0), as Prometheus
  /// asks of labelled counters.
  static let uploadOutcomes = [
    "stored", "connection_lost", "timed_out", "path_conflict", "unsupported_type",
    "insufficient_storage", "write_failed", "cancelled",
  ]
}

extension OperationsState.Snapshot {
  /// The event loop's lag now: the last timer's lateness, or, while the loop has not run its
  /// timer for longer than its period, how overdue it is (a wedged loop's lag keeps growing).
  func loopLag(now: Double) -> Double {
    guard let lastLoopTick else { return loopLag }
    return max(loopLag, now - (lastLoopTick + loopTickInterval))
  }

  /// systemd's `STATUS=` line: "3 batches waiting; last forward 12:03 OK to nas.local".
  func statusLine(kiosk: Bool, destination: String?) -> String {
    // Not the uploads in flight: the line would change, and be sent, with every upload.
    var parts: [String] = []
    if kiosk {
      parts.append(
        outboxBatches == 0
          ? "no batch waiting" : ReportText.count(outboxBatches, "batch") + " waiting")
    }
    let target = destination.map { " to \($0)" } ?? ""
    if let lastForwardEnded {
      let outcome = lastForwardFailure == nil ? "OK" : "failed"
      parts.append(
        "last forward \(WallClock.hoursAndMinutes(lastForwardEnded)) \(outcome)\(target)")
    } else if destination != nil {
      parts.append("nothing forwarded yet\(target)")
    }
    if !listening { parts.insert("not listening", at: 0) }
    return parts.isEmpty ? "listening" : parts.joined(separator: "; ")
  }

  /// Why the kiosk is not healthy, or `nil` when it is: the listener is up and the last forward
  /// did not fail.
  var unhealthyReason: String? {
    if !listening { return "The upload listener is not listening." }
    if let lastForwardFailure { return "The last forward failed: \(lastForwardFailure)" }
    return nil
  }
}

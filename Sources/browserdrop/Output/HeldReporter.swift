import Synchronization

/// Keeps the reports it is given until ``release()``, then passes them on in the order they
/// came, and every later one at once.
///
/// The kiosk starts the next batch's session before it reports the batch that closed: the
/// session runs, keeps count and answers at once, and only its lines wait, so that nothing
/// of the next batch is printed before the closing batch's own line.
final class HeldReporter: Reporter {
  private enum Phase {
    /// Reports are kept until ``HeldReporter/release()``.
    case holding
    /// ``HeldReporter/release()`` is passing the kept reports on; reports that come meanwhile
    /// are kept and go after them.
    case draining
    /// Reports go straight on.
    case released
  }

  private struct State {
    var phase = Phase.holding
    /// Reports not passed on yet, in the order they came.
    var kept: [Report] = []
  }

  /// The reporter the reports go to.
  private let reporter: any Reporter
  private let state = Mutex(State())

  /// Keeps reports for `reporter` until ``release()``.
  init(_ reporter: any Reporter) {
    self.reporter = reporter
  }

  /// Keeps `report`, or passes it on once released. Of progress lists, each a whole snapshot,
  /// only the latest of a run is kept.
  func report(_ report: Report) {
    let passOn = state.withLock { state -> Bool in
      guard state.phase != .released else { return true }
      if case .progress = report, case .progress = state.kept.last {
        state.kept[state.kept.count - 1] = report
      } else {
        state.kept.append(report)
      }
      return false
    }
    if passOn { reporter.report(report) }
  }

  /// Not held: only the reports are.
  func setHint(_ hint: String) {
    reporter.setHint(hint)
  }

  /// Passes the kept reports on, then every later one at once; calling it again, even while
  /// the first call is still passing reports on, does nothing. The reports go on outside the
  /// lock (a reporter may do more than queue text: the operations display counts and notifies
  /// systemd), so the event loop, which reports from the session's readers, never waits for
  /// them; a report made meanwhile is kept and goes after them.
  func release() {
    let drains = state.withLock { state -> Bool in
      guard state.phase == .holding else { return false }
      state.phase = .draining
      return true
    }
    guard drains else { return }
    while true {
      let batch = state.withLock { state -> [Report]? in
        guard !state.kept.isEmpty else {
          state.phase = .released
          return nil
        }
        defer { state.kept = [] }
        return state.kept
      }
      guard let batch else { return }
      for report in batch { reporter.report(report) }
    }
  }
}

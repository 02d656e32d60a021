import Synchronization

/// Keeps the reports it is given until ``release()``, then passes them on in the order they
/// came, and every later one at once.
///
/// The kiosk starts the next batch's session before it reports the batch that closed: the
/// session runs, keeps count and answers at once, and only its lines wait, so that nothing
/// of the next batch is printed before the closing batch's own line.
final class HeldReporter: Reporter {
  private enum State {
    /// Reports kept until ``HeldReporter/release()``.
    case holding([Report])
    /// ``HeldReporter/release()`` is passing kept reports on; these came meanwhile, and go
    /// after them.
    case draining([Report])
    /// Reports go straight on.
    case released
  }

  /// The reporter the reports go to.
  private let reporter: any Reporter
  private let state = Mutex(State.holding([]))

  /// Keeps reports for `reporter` until ``release()``.
  init(_ reporter: any Reporter) {
    self.reporter = reporter
  }

  /// Keeps `report`, or passes it on once released. Of progress lists, each a whole snapshot,
  /// only the latest of a run is kept.
  func report(_ report: Report) {
    let passOn = state.withLock { state -> Bool in
      switch state {
      case .holding(var kept):
        Self.keep(report, in: &kept)
        state = .holding(kept)
      case .draining(var kept):
        Self.keep(report, in: &kept)
        state = .draining(kept)
      case .released:
        return true
      }
      return false
    }
    if passOn { reporter.report(report) }
  }

  /// Not held: only the reports are.
  func setHint(_ hint: String) {
    reporter.setHint(hint)
  }

  /// Passes the kept reports on, then every later one at once; calling it again does nothing.
  /// The reports go on outside the lock (a reporter may do more than queue text: the
  /// operations display counts and notifies systemd), so the event loop, which reports from
  /// the session's readers, never waits for them; a report made meanwhile is kept and goes
  /// after them.
  func release() {
    while true {
      let batch = state.withLock { state -> [Report]? in
        switch state {
        case .holding(let kept), .draining(let kept):
          if kept.isEmpty {
            state = .released
            return nil
          }
          state = .draining([])
          return kept
        case .released:
          return nil
        }
      }
      guard let batch else { return }
      for report in batch { reporter.report(report) }
    }
  }

  private static func keep(_ report: Report, in kept: inout [Report]) {
    if case .progress = report, case .progress = kept.last {
      kept[kept.count - 1] = report
    } else {
      kept.append(report)
    }
  }
}

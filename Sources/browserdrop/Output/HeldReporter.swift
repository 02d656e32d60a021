import Synchronization

/// Keeps the reports it is given until ``release()``, then passes them on in the order they
/// came, and every later one at once.
///
/// The kiosk starts the next batch's session before it reports the batch that closed: the
/// session runs, keeps count and answers at once, and only its lines wait, so that nothing
/// of the next batch is printed before the closing batch's own line.
final class HeldReporter: Reporter {
  private let reporter: any Reporter
  /// The reports kept; `nil` once released.
  private let kept = Mutex<[Report]?>([])

  init(_ reporter: any Reporter) {
    self.reporter = reporter
  }

  func report(_ report: Report) {
    let keptIt = kept.withLock { kept in
      guard kept != nil else { return false }
      kept!.append(report)
      return true
    }
    if !keptIt { reporter.report(report) }
  }

  func setHint(_ hint: String) {
    reporter.setHint(hint)
  }

  /// Passes the kept reports on and stops keeping. The lock is held while they go, so a report
  /// made meanwhile comes after them; reporters only format and queue text, so it is short.
  func release() {
    kept.withLock { kept in
      for report in kept ?? [] { reporter.report(report) }
      kept = nil
    }
  }
}

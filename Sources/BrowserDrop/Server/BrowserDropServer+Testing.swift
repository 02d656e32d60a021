import Glibc

extension BrowserDropServer {
  /// Makes the event loop's next `epoll_wait` fail with `code`, as a kernel failure would, so a
  /// test can see the session report `.interrupted` and `resume()` make a new loop. The loop is
  /// shared by every server in the process.
  package nonisolated func failEventLoopForTesting(_ code: Int32) {
    Reactor.shared.injectWaitFailure(code)
  }
}

extension BrowserDropServer {
  /// Whether `finishHandingOverListener` is letting admitted uploads end (it admits none).
  var isFinishing: Bool {
    if case .finishing = state { true } else { false }
  }

  /// How many connections the session has parked so far while handing its listener over.
  var parkedConnections: Int {
    state.session?.services.handover.parkedCount ?? 0
  }
}

import BrowserDrop
import Foundation
import Synchronization
import Testing

@testable import browserdrop

/// The reporter the kiosk's next session reports through until the closing batch's line is
/// out: kept reports go on in their order, then later ones at once, none lost or doubled.
@Suite("Held reports")
struct HeldReporterTests {
  /// Records the notices it is given, in order.
  final class Recorder: Reporter {
    private let lines = Mutex<[String]>([])
    var recorded: [String] { lines.withLock { $0 } }

    func report(_ report: Report) {
      switch report {
      case .notice(let text): lines.withLock { $0.append(text) }
      case .progress(let list): lines.withLock { $0.append("progress \(list.count)") }
      default: break
      }
    }
  }

  @Test func keptReportsGoOnInOrderAtTheReleaseAndLaterOnesAtOnce() {
    let recorder = Recorder()
    let held = HeldReporter(recorder)
    held.report(.notice("a"))
    held.report(.notice("b"))
    #expect(recorder.recorded.isEmpty)
    held.release()
    #expect(recorder.recorded == ["a", "b"])
    held.report(.notice("c"))
    held.release()
    #expect(recorder.recorded == ["a", "b", "c"])
  }

  @Test func ofARunOfProgressListsOnlyTheLatestIsKept() {
    let recorder = Recorder()
    let held = HeldReporter(recorder)
    held.report(.progress([]))
    held.report(.notice("a"))
    held.report(.progress([]))
    held.report(.progress([]))
    held.release()
    #expect(recorder.recorded == ["progress 0", "a", "progress 0"])
  }

  /// Passes each report to `then` after recording it: a reporter that reports again, or
  /// releases again, from inside a report.
  final class Reentrant: Reporter {
    let recorder = Recorder()
    let then = Mutex<(@Sendable (Report) -> Void)?>(nil)

    func report(_ report: Report) {
      recorder.report(report)
      let then = self.then.withLock { $0 }
      then?(report)
    }
  }

  /// A second release while the first is still passing reports on (here from inside a report)
  /// returns at once: a report made meanwhile still goes after the ones kept before it.
  @Test func aSecondReleaseDuringTheFirstKeepsTheOrder() {
    let reentrant = Reentrant()
    let held = HeldReporter(reentrant)
    reentrant.then.withLock {
      $0 = { report in
        guard case .notice("a") = report else { return }
        held.report(.notice("x"))
        held.release()
      }
    }
    held.report(.notice("a"))
    held.report(.notice("b"))
    held.release()
    #expect(reentrant.recorder.recorded == ["a", "b", "x"])
  }

  /// Several threads report numbered sequences while the release runs: every report arrives
  /// once, each thread's in its order.
  @Test func reportsMadeDuringTheReleaseAreNeitherLostNorReordered() async throws {
    let recorder = Recorder()
    let held = HeldReporter(recorder)
    let senders = 4
    let count = 2_000
    for sender in 0..<senders { held.report(.notice("\(sender) -1")) }
    try await withThrowingTaskGroup(of: Void.self) { group in
      for sender in 0..<senders {
        group.addTask {
          for index in 0..<count { held.report(.notice("\(sender) \(index)")) }
        }
      }
      group.addTask { held.release() }
      try await group.waitForAll()
    }
    let recorded = recorder.recorded
    #expect(recorded.count == senders * (count + 1))
    for sender in 0..<senders {
      let mine = recorded.filter { $0.hasPrefix("\(sender) ") }
      #expect(mine == ["\(sender) -1"] + (0..<count).map { "\(sender) \($0)" })
    }
  }
}

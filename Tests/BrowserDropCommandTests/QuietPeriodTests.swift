import BrowserDrop
import Foundation
import Synchronization
import Testing

@testable import browserdrop

/// The kiosk's quiet period on a clock that moves only when the loop sleeps: exact, instant.
@Suite("A kiosk batch closes after its quiet period")
struct QuietPeriodTests {
  /// Time that starts at the monotonic clock's now and moves by each sleep, at once.
  final class VirtualTime: Sendable {
    let start = Monotonic.seconds()
    private let slept = Mutex(0.0)
    private let onSleep: @Sendable (Double) -> Void

    init(onSleep: @escaping @Sendable (Double) -> Void = { _ in }) { self.onSleep = onSleep }

    var elapsed: Double { slept.withLock { $0 } }

    var clock: QuietClock {
      QuietClock(
        now: { self.start + self.elapsed },
        sleep: { seconds in
          let total = self.slept.withLock { slept in
            slept += seconds
            return slept
          }
          self.onSleep(total)
          // Time moves at once, yet other tasks get their turn as they would during a sleep.
          await Task.yield()
        })
    }
  }

  static func activityWithOneFile(inFlight: Bool) -> SessionActivity {
    let activity = SessionActivity()
    let upload = Upload(id: 1, relativePath: "a.bin", size: 1)
    activity.note(.uploadStarted(upload))
    activity.note(
      .uploadFinished(
        ReceivedFile(
          relativePath: "a.bin", size: 1, url: URL(fileURLWithPath: "/tmp/a.bin"),
          receivedAt: Date(), mimeType: nil, kind: .other)))
    if inFlight { activity.note(.uploadStarted(Upload(id: 2, relativePath: "b", size: 9))) }
    return activity
  }

  @Test(arguments: [0.3, 3.0, 60.0])
  func aQuietBatchClosesWhenItsQuietPeriodHasPassed(quietPeriod: Double) async {
    let activity = Self.activityWithOneFile(inFlight: false)
    let time = VirtualTime()
    await KioskCommand.waitForBatchEnd(
      activity, quietPeriod: quietPeriod, stopRequested: StopFlag(), clock: time.clock)
    let step = min(0.25, quietPeriod / 4)
    #expect(time.elapsed >= quietPeriod - 1e-9, "closed early, after \(time.elapsed) s")
    #expect(time.elapsed <= quietPeriod + step + 1e-9, "closed late, after \(time.elapsed) s")
  }

  /// An upload in flight keeps the batch open however long it lasts: only the stop ends it.
  @Test func anUploadInFlightKeepsTheBatchOpen() async {
    let activity = Self.activityWithOneFile(inFlight: true)
    let stop = StopFlag()
    let time = VirtualTime { total in if total >= 600 { stop.set() } }
    await KioskCommand.waitForBatchEnd(
      activity, quietPeriod: 1, stopRequested: stop, clock: time.clock)
    #expect(time.elapsed >= 600)
  }

  @Test func aBatchWithNothingInItNeverCloses() async {
    let stop = StopFlag()
    let time = VirtualTime { total in if total >= 600 { stop.set() } }
    await KioskCommand.waitForBatchEnd(
      SessionActivity(), quietPeriod: 1, stopRequested: stop, clock: time.clock)
    #expect(time.elapsed >= 600)
  }
}

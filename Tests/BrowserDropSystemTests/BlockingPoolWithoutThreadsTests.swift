import BrowserDropSystem
import Glibc
import Synchronization
import Testing

/// What a pool does when the system has no thread to give (its thread maker fails).
@Suite struct BlockingPoolWithoutThreadsTests {
  private static let failing: BlockingPool.ThreadMaker = { _, _ throws(SystemError) in
    throw SystemError(call: "pthread_create", code: EAGAIN)
  }

  @Test func workRunsOnTheCallerInOrderAndStartReportsTheFailure() async {
    let lane = BlockingPool(name: "bd-none", threads: 1, makeThread: Self.failing)
    #expect(throws: SystemError(call: "pthread_create", code: EAGAIN)) { try lane.start() }
    let log = Mutex<[Int]>([])
    for index in 0..<20 { lane.submit { log.withLock { $0.append(index) } } }
    let last = await lane.run { log.withLock { $0.count } }
    #expect(last == 20)
    #expect(log.withLock { $0 } == Array(0..<20))
    #expect(lane.runningThreads == 0)
    await lane.shutdown()
  }

  @Test func aLaneNeverRunsTwoJobsAtOnceWhileThreadsComeAndGo() async {
    // Every other attempt to make a thread fails: jobs run on submitters and on the lane's
    // thread in turn, never two at once.
    let attempts = Atomic(0)
    let lane = BlockingPool(name: "bd-flaky", threads: 1) { name, body throws(SystemError) in
      if attempts.add(1, ordering: .relaxed).newValue % 2 == 1 {
        throw SystemError(call: "pthread_create", code: EAGAIN)
      }
      try SystemThread.start(name: name, body)
    }
    final class Counts: Sendable {
      let busy = Atomic(0)
      let overlaps = Atomic(0)
      let ran = Atomic(0)
    }
    let counts = Counts()
    await withTaskGroup(of: Void.self) { group in
      for _ in 0..<200 {
        group.addTask {
          await lane.run {
            if counts.busy.add(1, ordering: .relaxed).newValue > 1 {
              counts.overlaps.add(1, ordering: .relaxed)
            }
            Syscall.sleep(.microseconds(50))
            counts.busy.subtract(1, ordering: .relaxed)
            counts.ran.add(1, ordering: .relaxed)
          }
        }
      }
    }
    await lane.shutdown()
    let ranCount = counts.ran.load(ordering: .relaxed)
    let overlapCount = counts.overlaps.load(ordering: .relaxed)
    #expect(ranCount == 200)
    #expect(overlapCount == 0)
    #expect(lane.runningThreads == 0)
  }

  @Test func aJobRunOnTheCallerNeverTakesTheCallersSignals() {
    let lane = BlockingPool(name: "bd-none", threads: 1, makeThread: Self.failing)
    @Sendable func mask() -> [Int32] {
      var mask = sigset_t()
      pthread_sigmask(SIG_SETMASK, nil, &mask)
      return (1..<32).filter { sigismember(&mask, $0) == 1 }
    }
    let before = mask()
    let inside = Mutex<[Int32]>([])
    // Threadless, so `submit` runs the job here, on this thread, before it returns.
    lane.submit { inside.withLock { $0 = mask() } }
    let during = inside.withLock { $0 }
    #expect(during.contains(SIGINT) && during.contains(SIGTERM) && during.contains(SIGPIPE))
    #expect(!during.contains(SIGSEGV))
    #expect(mask() == before, "the caller's own mask is restored")
  }

  @Test func longNamesAreCutToWhatTheKernelKeeps() async {
    let pool = BlockingPool.serial(name: "bd-a-rather-long-lane-name")
    let name = await pool.run { currentThreadName() }
    #expect(name == "bd-a-rather-lon")
    await pool.shutdown()
  }
}

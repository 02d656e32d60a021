import BrowserDropSystem
import Glibc
import Synchronization
import Testing

@Suite struct BlockingPoolTests {
  @Test func runsWorkOnItsOwnThreadsAndReturnsResultsAndErrors() async throws {
    let pool = BlockingPool(name: "bd-test", threads: 2)
    let onPool = await pool.run { pool.runsCurrentThread }
    #expect(onPool)
    #expect(!pool.runsCurrentThread)
    await #expect(throws: SystemError(call: "x", code: EIO)) {
      try await pool.run { () throws(SystemError) in throw SystemError(call: "x", code: EIO) }
    }
    await pool.shutdown()
  }

  @Test func aSerialLaneRunsJobsOneAtATimeInOrder() async {
    let lane = BlockingPool.serial(name: "bd-test-lane")
    let log = Mutex<[Int]>([])
    let busy = Atomic(0)
    let overlapped = Atomic(false)
    await withTaskGroup(of: Void.self) { group in
      for index in 0..<50 {
        // Submitted in order from one task, so the lane's order is the submission order.
        lane.submit {
          if busy.add(1, ordering: .relaxed).newValue > 1 {
            overlapped.store(true, ordering: .relaxed)
          }
          log.withLock { $0.append(index) }
          busy.subtract(1, ordering: .relaxed)
        }
      }
      group.addTask { _ = await lane.run { 0 } }
    }
    #expect(log.withLock { $0 } == Array(0..<50))
    let didOverlap = overlapped.load(ordering: .relaxed)
    #expect(!didOverlap)
    #expect(lane.runningThreads == 1)
    await lane.shutdown()
  }

  @Test func shutdownRunsWhatWasQueuedThenEndsEveryThread() async throws {
    let pool = BlockingPool(name: "bd-test-stop", threads: 3)
    try pool.start()
    #expect(pool.runningThreads == 3)
    let done = Atomic(0)
    for _ in 0..<20 {
      pool.submit {
        Syscall.sleep(.milliseconds(1))
        done.add(1, ordering: .relaxed)
      }
    }
    await pool.shutdown()
    #expect(done.load(ordering: .relaxed) == 20)
    #expect(pool.runningThreads == 0)
    // Work that comes after the end still runs, on the caller's thread.
    let late = await pool.run { pool.runsCurrentThread }
    #expect(!late)
  }

  @Test func threadsStartOnDemandAndCarryTheirNames() async throws {
    let pool = BlockingPool(name: "bd-named", threads: 2)
    #expect(pool.runningThreads == 0)
    let name = await pool.run { currentThreadName() }
    #expect(name == "bd-named-0")
    await pool.shutdown()
  }

  @Test func threadsBlockTheHostsSignals() async throws {
    let pool = BlockingPool.serial(name: "bd-signals")
    let blocked = await pool.run { () -> [Bool] in
      var mask = sigset_t()
      pthread_sigmask(SIG_SETMASK, nil, &mask)
      return [SIGINT, SIGTERM, SIGPIPE, SIGCHLD, SIGSEGV].map { sigismember(&mask, $0) == 1 }
    }
    #expect(blocked == [true, true, true, true, false])
    await pool.shutdown()
  }
}

/// The kernel's name for the calling thread (`/proc/thread-self/comm`, without its newline).
func currentThreadName() -> String {
  let fd = open("/proc/thread-self/comm", O_RDONLY | O_CLOEXEC)
  defer { close(fd) }
  var buffer = [UInt8](repeating: 0, count: 32)
  let count = read(fd, &buffer, buffer.count)
  return String(decoding: buffer[..<max(0, count - 1)], as: UTF8.self)
}

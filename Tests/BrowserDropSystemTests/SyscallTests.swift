import BrowserDropSystem
import Glibc
import Testing

@Suite struct SyscallTests {
  @Test func retriesInterruptedCallsAndReportsOtherFailuresWithTheCallsName() throws {
    var attempts = 0
    let result = try Syscall.blocking("test_call") { () -> Int32 in
      attempts += 1
      if attempts < 3 {
        errno = EINTR
        return -1
      }
      return 7
    }
    #expect(result == 7)
    #expect(attempts == 3)

    #expect(throws: SystemError(call: "openat", code: ENOENT)) {
      try Syscall.blocking("openat") { open("/nonexistent/browserdrop", O_RDONLY) }
    }
  }

  @Test func wouldBlockIsAValueNotAnError() throws {
    var fds: [Int32] = [0, 0]
    try Syscall.blocking("pipe") { pipe(&fds) }
    _ = fcntl(fds[0], F_SETFL, O_NONBLOCK)
    defer { fds.forEach { close($0) } }
    var byte: UInt8 = 0
    #expect(try Syscall.nonBlocking("read") { read(fds[0], &byte, 1) } == nil)
    _ = write(fds[1], "x", 1)
    #expect(try Syscall.nonBlocking("read") { read(fds[0], &byte, 1) } == 1)
    close(fds[1])
    fds[1] = -1
    #expect(try Syscall.nonBlocking("read") { read(fds[0], &byte, 1) } == 0)
  }

  @Test func errorsReadAsSentencesWithTheCallAndErrno() {
    let error = SystemError(call: "fsync", code: EIO)
    #expect(error.reason == "Input/output error")
    #expect(error.description == "fsync: Input/output error (errno 5)")
  }
}

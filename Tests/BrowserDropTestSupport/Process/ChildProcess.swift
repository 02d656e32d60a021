package import Foundation
import Glibc
import Synchronization

/// A program run with `posix_spawn`, its pipes read and its exit reaped by threads of its own.
///
/// Foundation's `Process` on Linux sometimes never reports a child's exit when many children are
/// spawned at once, and its pipes are inherited by whatever else the test process spawns in the
/// meantime. Here every descriptor of the parent is close-on-exec from the moment it exists, the
/// pipes are read by dedicated threads (never the cooperative pool, which has as many threads as
/// cores), and one thread per child blocks in `waitid` and delivers the status through
/// continuations. Only the process started here is ever signalled, and never after it was
/// reaped, so a recycled PID can't be hit.
package final class ChildProcess: Sendable {
  /// Where a standard stream goes.
  package enum Stream: Sendable {
    /// A pipe to this process: written with `write(_:)`, or captured in `output`/`errorOutput`.
    case pipe
    /// `/dev/null`.
    case null
    /// The test process's own descriptor.
    case inherit
    /// A file, created or truncated (output only): for a child that leaves a process behind
    /// holding its standard output (tmux's server), whose pipe would never reach its end.
    case file(String)
  }

  /// A resource limit the child starts with (soft and hard).
  package enum Limit: Sendable {
    /// `RLIMIT_NOFILE`: how many descriptors it may hold.
    case openFiles(Int)
    /// `RLIMIT_FSIZE`: how large, in bytes, a file it writes may grow (a write past it fails
    /// with `EFBIG` where `SIGXFSZ` is ignored, and otherwise kills it).
    case fileSize(Int)
  }

  /// How the child ended.
  package enum Termination: Sendable, Equatable {
    case exited(Int32)
    case signalled(Int32)

    /// The exit code, or the signal's number (what `Process.terminationStatus` says).
    package var status: Int32 {
      switch self {
      case .exited(let code), .signalled(let code): code
      }
    }

    package init(waitStatus: Int32) {
      let signal = waitStatus & 0x7f
      self = signal == 0 ? .exited((waitStatus >> 8) & 0xff) : .signalled(signal)
    }
  }

  private struct State {
    var output = Data()
    var errorOutput = Data()
    var openPipes = 0
    var input: Int32 = -1
    var termination: Termination?
    var waiters: [UInt64: CheckedContinuation<Termination?, Never>] = [:]
    var nextWaiter: UInt64 = 0

    /// Exited, and every pipe read to its end.
    package var finished: Termination? { openPipes == 0 ? termination : nil }
  }

  /// The process ID.
  package let pid: pid_t
  private let state: Mutex<State>

  /// Starts `executable` with `arguments` (without the program name) and `environment` (the test
  /// process's own when nil), under `limits`.
  package init(
    _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
    input: Stream = .null, output: Stream = .pipe, error: Stream = .pipe, limits: [Limit] = []
  ) throws {
    Self.ignoreBrokenPipes
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    // Parent ends (kept) and child ends (closed here once the child has them).
    var parentEnds: [Int32] = [-1, -1, -1]
    var childEnds: [Int32] = []
    defer { childEnds.forEach { close($0) } }
    do {
      for (target, stream) in [input, output, error].enumerated() {
        switch stream {
        case .inherit: break
        case .null:
          posix_spawn_file_actions_addopen(
            &actions, Int32(target), "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0)
        case .file(let path):
          posix_spawn_file_actions_addopen(
            &actions, Int32(target), path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        case .pipe:
          // Both ends close-on-exec at once (no other spawn can inherit them); dup2 gives the
          // child its copy without the flag.
          var ends: [Int32] = [-1, -1]
          guard pipe2(&ends, O_CLOEXEC) == 0 else { throw POSIXError(Self.errno) }
          let (parentEnd, childEnd) = target == 0 ? (ends[1], ends[0]) : (ends[0], ends[1])
          parentEnds[target] = parentEnd
          childEnds.append(childEnd)
          posix_spawn_file_actions_adddup2(&actions, childEnd, Int32(target))
        }
      }
    } catch {
      parentEnds.filter { $0 >= 0 }.forEach { close($0) }
      throw error
    }

    // Default dispositions and an empty mask in the child, whatever this process has set.
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var all = sigset_t()
    sigfillset(&all)
    sigdelset(&all, SIGKILL)
    sigdelset(&all, SIGSTOP)
    posix_spawnattr_setsigdefault(&attributes, &all)
    var none = sigset_t()
    sigemptyset(&none)
    posix_spawnattr_setsigmask(&attributes, &none)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

    // posix_spawn sets no resource limits: prlimit(1) sets them and execs the program in its
    // place (same PID), rather than `setrlimit` here, which would hold for every other thread's
    // children too.
    let command =
      limits.isEmpty
      ? [executable] + arguments
      : ["/usr/bin/prlimit"] + limits.map(\.option) + ["--", executable] + arguments
    let argv = command.map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid = pid_t()
    let spawned: Int32
    if let environment {
      let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
      defer { envp.forEach { free($0) } }
      spawned = posix_spawn(&pid, command[0], &actions, &attributes, argv, envp)
    } else {
      spawned = posix_spawn(&pid, command[0], &actions, &attributes, argv, environ)
    }
    guard spawned == 0 else {
      parentEnds.filter { $0 >= 0 }.forEach { close($0) }
      throw HarnessError(
        description: "can't start \(executable): \(String(cString: strerror(spawned)))")
    }
    self.pid = pid
    var initial = State()
    initial.input = parentEnds[0]
    initial.openPipes = parentEnds[1...].filter { $0 >= 0 }.count
    state = Mutex(initial)
    if parentEnds[1] >= 0 { startReading(parentEnds[1], isOutput: true) }
    if parentEnds[2] >= 0 { startReading(parentEnds[2], isOutput: false) }
    startReaping()
  }

  deinit {
    state.withLock { state in
      if state.input >= 0 { close(state.input) }
    }
  }

  /// Writing to a pipe whose reader is gone fails with EPIPE instead of killing the tests.
  private static let ignoreBrokenPipes: Void = {
    _ = Glibc.signal(SIGPIPE, SIG_IGN)
  }()

  private static var errno: POSIXErrorCode {
    POSIXErrorCode(rawValue: Glibc.errno) ?? .EIO
  }

  private func startReading(_ fd: Int32, isOutput: Bool) {
    let thread = Thread { [self] in
      var buffer = [UInt8](repeating: 0, count: 65_536)
      while true {
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if count < 0 && Glibc.errno == EINTR { continue }
        let chunk = count > 0 ? Data(buffer[0..<count]) : Data()
        let done = state.withLock { state -> [CheckedContinuation<Termination?, Never>] in
          if isOutput { state.output.append(chunk) } else { state.errorOutput.append(chunk) }
          guard count <= 0 else { return [] }
          state.openPipes -= 1
          return Self.takeWaitersIfFinished(&state)
        }
        guard count <= 0 else { continue }
        close(fd)
        Self.resume(done, with: state.withLock { $0.finished })
        return
      }
    }
    thread.start()
  }

  private func startReaping() {
    let thread = Thread { [self] in
      // Waits without reaping, so the PID stays ours (and `signal` safe) until the status is
      // recorded under the lock; then reaps.
      var info = siginfo_t()
      while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) < 0 && Glibc.errno == EINTR {}
      let done = state.withLock { state -> [CheckedContinuation<Termination?, Never>] in
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && Glibc.errno == EINTR {}
        state.termination = Termination(waitStatus: status)
        return Self.takeWaitersIfFinished(&state)
      }
      Self.resume(done, with: state.withLock { $0.finished })
    }
    thread.start()
  }

  private static func takeWaitersIfFinished(
    _ state: inout State
  ) -> [CheckedContinuation<Termination?, Never>] {
    guard state.finished != nil else { return [] }
    defer { state.waiters = [:] }
    return Array(state.waiters.values)
  }

  private static func resume(
    _ waiters: [CheckedContinuation<Termination?, Never>], with value: Termination?
  ) {
    for waiter in waiters { waiter.resume(returning: value) }
  }

  /// Everything written to standard output so far (when it is a pipe).
  package var output: Data { state.withLock { $0.output } }

  /// Everything written to standard error so far (when it is a pipe).
  package var errorOutput: Data { state.withLock { $0.errorOutput } }

  /// How the process ended, once it has (its pipes may still hold output).
  package var termination: Termination? { state.withLock { $0.termination } }

  /// Exited, and its output read to the end.
  package var finished: Termination? { state.withLock { $0.finished } }

  /// Writes to standard input (when it is a pipe and still open); false when that failed.
  /// Blocks while the child does not read; not to be called together with `closeInput`.
  @discardableResult
  package func write(_ data: Data) -> Bool {
    // A close-on-exec copy, so the lock is not held while the pipe is full.
    let fd = state.withLock { $0.input >= 0 ? fcntl($0.input, F_DUPFD_CLOEXEC, 0) : -1 }
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var rest = data[...]
    while !rest.isEmpty {
      let written = rest.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
      if written < 0 {
        if Glibc.errno == EINTR { continue }
        return false
      }
      rest = rest.dropFirst(written)
    }
    return true
  }

  /// Closes standard input (end of input).
  package func closeInput() {
    state.withLock { state in
      if state.input >= 0 { close(state.input) }
      state.input = -1
    }
  }

  /// Sends `signal` if the process has not been reaped yet; false when it had.
  @discardableResult
  package func signal(_ signal: Int32) -> Bool {
    state.withLock { state in
      guard state.termination == nil else { return false }
      return kill(pid, signal) == 0
    }
  }

  /// Waits until the process has exited and its pipes are read to the end; nil after `timeout`.
  package func wait(timeout: Duration) async -> Termination? {
    await withCheckedContinuation { continuation in
      let id = state.withLock { state -> UInt64? in
        guard state.finished == nil else { return nil }
        state.nextWaiter += 1
        state.waiters[state.nextWaiter] = continuation
        return state.nextWaiter
      }
      guard let id else {
        continuation.resume(returning: finished)
        return
      }
      Task { [self] in
        try? await Task.sleep(for: timeout)
        let expired = state.withLock { $0.waiters.removeValue(forKey: id) }
        expired?.resume(returning: nil)
      }
    }
  }
}

extension ChildProcess.Limit {
  /// prlimit(1)'s option for the limit.
  fileprivate var option: String {
    switch self {
    case .openFiles(let count): "--nofile=\(count):\(count)"
    case .fileSize(let bytes): "--fsize=\(bytes):\(bytes)"
    }
  }
}

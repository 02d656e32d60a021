import BrowserDropSystem
internal import CSMBClientLoader
import Glibc

/// A writer child (see `cbd_smbc_fork_writer`) seen from the parent: its PID, the shared
/// counter of bytes it has written, and a kill that can never hit another process.
///
/// A thread of its own waits for the child to exit without reaping it (`waitid` with
/// `WNOWAIT`, never on the cooperative pool); the child is reaped only by ``reap()`` or
/// `deinit`, so until then its PID stays reserved and ``kill()`` is safe.
/// `@unchecked Sendable`: the mutable state is only touched while `lock` is held.
final class SMBChildWriter: @unchecked Sendable {
  /// The child's process ID.
  let pid: pid_t
  private let counter: UnsafeMutablePointer<Int64>
  private let lock = ThreadCondition()
  private var exitSeen = false
  private var reaped = false
  private var waiting: [CheckedContinuation<Void, Never>] = []

  private init(pid: pid_t, counter: UnsafeMutablePointer<Int64>) {
    self.pid = pid
    self.counter = counter
  }

  /// Whether this process can wait for a child: false when SIGCHLD is ignored or has
  /// `SA_NOCLDWAIT` (the kernel would reap the child and its status would be lost).
  static var canWaitForChildren: Bool { cbd_children_reapable() != 0 }

  /// Forks a child that writes stripes `stripe`, `stripe + stripes`, … of `source` to `path`
  /// through `context`'s address and credentials on a connection of its own. Run it on
  /// ``DedicatedThread/smb``, so libsmbclient is quiescent at the fork.
  static func start(
    context: SMBContext, path: RelativePath, source: Int32, size: Int64, stripeSize: Int,
    stripe: Int, stripes: Int
  ) throws(SystemError) -> SMBChildWriter {
    guard let counter = cbd_shared_counter_create() else { throw SystemError.last("mmap") }
    let pid: pid_t
    do {
      pid = try context.forkWriter(
        to: path, source: source, size: size, stripeSize: stripeSize, stripe: stripe,
        stripes: stripes, progress: counter)
    } catch {
      cbd_shared_counter_destroy(counter)
      throw error
    }
    let writer = SMBChildWriter(pid: pid, counter: counter)
    do {
      try SystemThread.start(name: "bd-smb-child") { [writer] in
        _ = cbd_child_wait_exited(writer.pid)
        writer.childExited()
      }
    } catch {
      // Nothing could learn when it ends: stop it now and reap it here (a killed child exits at
      // once; this runs on the SMB lane, where waiting is allowed), so no zombie keeps its PID.
      writer.kill()
      writer.reapKilled()
      throw error
    }
    return writer
  }

  private func reapKilled() {
    lock.lock()
    defer { lock.unlock() }
    var status: Int32 = 0
    _ = try? Syscall.blocking("waitpid") { waitpid(pid, &status, 0) }
    reaped = true
  }

  private func childExited() {
    lock.lock()
    exitSeen = true
    let waiting = self.waiting
    self.waiting = []
    lock.unlock()
    for continuation in waiting { continuation.resume() }
  }

  deinit {
    // The waiter thread holds a reference until the child has exited, so this never blocks;
    // it only collects a child that was not reaped (a failure path), leaving no zombie.
    if !reaped {
      var status: Int32 = 0
      _ = cbd_child_reap(pid, &status)
    }
    cbd_shared_counter_destroy(counter)
  }

  /// Bytes the child has written so far.
  var bytesWritten: Int64 { cbd_shared_counter_load(counter) }

  /// Whether the child has exited (it may not be reaped yet).
  var hasExited: Bool {
    lock.lock()
    defer { lock.unlock() }
    return exitSeen
  }

  /// Returns once the child has exited; not cut short by cancellation (kill it first).
  func exited() async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      lock.lock()
      if exitSeen {
        lock.unlock()
        continuation.resume()
      } else {
        waiting.append(continuation)
        lock.unlock()
      }
    }
  }

  /// SIGKILLs the child unless it has been reaped already.
  func kill() {
    lock.lock()
    defer { lock.unlock() }
    if !reaped { Glibc.kill(pid, SIGKILL) }
  }

  /// Reaps the exited child (call after ``exited()``) and returns its exit status: 0 for
  /// success, otherwise the errno it failed with; a child killed by a signal, or one whose
  /// status another waiter of this process took, gives `EIO`/`ECHILD`.
  func reap() -> Int32 {
    lock.lock()
    defer { lock.unlock() }
    if reaped { return ECHILD }
    var status: Int32 = 0
    let code = cbd_child_reap(pid, &status)
    if code == EAGAIN { return EIO }  // Not exited: never expected after exited().
    reaped = true
    if code != 0 { return code }
    return status >= 0 ? status : EIO
  }
}

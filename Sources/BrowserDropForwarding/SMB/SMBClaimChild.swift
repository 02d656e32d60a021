import BrowserDropSystem
internal import CSMBClientLoader
import Glibc

/// The one claim child of a delivery (see `cbd_smbc_fork_claimer`), seen from the SMB thread:
/// forked at the first claim, signed in once, holding the manifest's exclusive `flock`, and
/// sent each claim over a Unix socket.
///
/// `@unchecked Sendable`: every method runs on ``DedicatedThread/smb``, one at a time.
final class SMBClaimChild: @unchecked Sendable {
  /// What became of one request.
  enum Answer: Sendable {
    /// The child answered: 0 (created and recorded), `EEXIST` (taken) or its errno.
    case answered(Int32)
    /// The request could not be sent (the child is gone, or fork failed): nothing was asked.
    case notSent(Int32)
    /// Sent, and the child ended before it answered (its alarm): the create may have happened.
    case lost
  }

  private var pid: pid_t = 0
  private var socket: Int32 = -1
  private var manifest = ""
  /// When the child last answered (or started); CLOCK_MONOTONIC nanoseconds.
  private var lastUse: Int64 = 0

  /// Whether a child is running for `manifest`.
  private func running(for manifest: String) -> Bool { pid > 0 && self.manifest == manifest }

  private static func now() -> Int64 {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
  }

  /// Sends the claim of `url` with `record` to the child for `manifest` (forked first when
  /// there is none, or when the one there is may be near its idle bound), and waits for the
  /// answer on this thread. `lockedManifest` opens the manifest and takes its exclusive lock.
  func claim(
    _ url: String, recording record: [UInt8], token: [UInt8], in manifest: String,
    context: SMBContext,
    lockedManifest: (String) throws(ForwardFailure) -> Int32
  ) throws(ForwardFailure) -> Answer {
    // The child's alarm ends it after `bound` seconds without a request; retire it well
    // before, so a request never races its end.
    let bound = context.claimBoundSeconds
    if pid > 0,
      !running(for: manifest) || cbd_claimer_alive(socket) == 0
        || Self.now() - lastUse > Int64(bound) * 500_000_000
    {
      end()
    }
    // A child that ended since the check above refuses the request unread: start another
    // and send it once more.
    for _ in 0..<2 {
      if pid == 0, let code = try start(for: manifest, context: context, lockedManifest) {
        return .notSent(code)
      }
      let sent = Self.send(url, record, token, to: socket)
      guard sent == 0 else {
        end()
        if sent == EINVAL { return .notSent(sent) }
        continue
      }
      let answer = cbd_claimer_receive(socket)
      lastUse = Self.now()
      if answer < 0 {
        end()
        return .lost
      }
      return .answered(answer)
    }
    return .notSent(EPIPE)
  }

  /// The ``ClaimTrial/crashOnceCreated`` seam: sends the claim, then, once `created` says the
  /// server has the file, lets the child go as a kill of this process would (closes this end:
  /// the child records the claim, sees the end of file and exits); a thread of its own reaps it.
  func abandon(
    _ url: String, recording record: [UInt8], token: [UInt8], in manifest: String,
    context: SMBContext,
    lockedManifest: (String) throws(ForwardFailure) -> Int32, once created: () -> Bool
  ) throws(ForwardFailure) -> Bool {
    if pid > 0 { end() }
    if try start(for: manifest, context: context, lockedManifest) != nil { return false }
    guard Self.send(url, record, token, to: socket) == 0 else {
      end()
      return false
    }
    for _ in 0..<1000 {
      if created() { break }
      usleep(10_000)
    }
    Glibc.close(socket)
    let child = pid
    (pid, socket) = (0, -1)
    let reap: @Sendable () -> Void = {
      var status: Int32 = 0
      _ = try? Syscall.blocking("waitpid") { waitpid(child, &status, 0) }
    }
    do { try SystemThread.start(name: "bd-claim-reaper", reap) } catch { reap() }
    return true
  }

  /// Ends the child: closes this end of the socket (the child sees the end of file after its
  /// last answer and exits) and reaps it. The child signs nothing off on its way out (see
  /// `claimer_main`), so this waits only for a request still in flight (after a claim whose
  /// answer was lost), bounded by the child's alarm, which is off only while it flushes a record.
  func end() {
    guard pid > 0 else { return }
    Glibc.close(socket)
    var status: Int32 = 0
    _ = try? Syscall.blocking("waitpid") { waitpid(pid, &status, 0) }
    (pid, socket, manifest) = (0, -1, "")
  }

  /// Forks the child for `manifest`; nil when it runs, otherwise the errno (nothing started).
  private func start(
    for manifest: String, context: SMBContext,
    _ lockedManifest: (String) throws(ForwardFailure) -> Int32
  ) throws(ForwardFailure) -> Int32? {
    // Locked before the fork, so the child holds the lock from its first instruction: a resume
    // (``Manifest/load(folder:destination:)``) waits until its last record is on disk.
    let file = try lockedManifest(manifest)
    defer { Glibc.close(file) }  // The child has its own copy, and with it the lock.
    var ends: [Int32] = [-1, -1]
    guard
      socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0
    else { return errno }
    let child: pid_t
    do throws(SystemError) {
      child = try context.forkClaimer(recordFile: file, socket: ends[1])
    } catch {
      Glibc.close(ends[0])
      Glibc.close(ends[1])
      return error.code
    }
    Glibc.close(ends[1])
    (pid, socket, self.manifest, lastUse) = (child, ends[0], manifest, Self.now())
    return nil
  }

  private static func send(
    _ url: String, _ record: [UInt8], _ token: [UInt8], to socket: Int32
  ) -> Int32 {
    url.withCString { url in
      record.withUnsafeBufferPointer { line in
        line.withMemoryRebound(to: CChar.self) { text in
          token.withUnsafeBufferPointer { token in
            token.withMemoryRebound(to: CChar.self) { token in
              cbd_claimer_send(
                socket, url, text.baseAddress, text.count, token.baseAddress, token.count)
            }
          }
        }
      }
    }
  }
}

import BrowserDropSystem
internal import CSMBClientLoader
import Glibc

/// Claiming a final name: the exclusive create and its record in the manifest as one step, in
/// a child process that finishes it even when this process is killed in between.
extension SMBFileSystem {
  /// What became of a claim on the SMB thread.
  fileprivate enum ClaimOutcome: Sendable {
    case claimed, taken, crashed
  }

  func claim(
    _ final: RelativePath, recording record: [UInt8], in manifest: String, trial: ClaimTrial?
  ) async throws -> Bool {
    let outcome = try await DedicatedThread.smb.run {
      [self] () throws(ForwardFailure) -> ClaimOutcome in
      // Locked before the fork, so the child holds the lock from its first instruction: a
      // resume (``Manifest/load(folder:destination:)``) waits until the record is on disk.
      let file = try Self.lockedManifest(manifest)
      defer { Glibc.close(file) }  // The child has its own copy, and with it the lock.
      guard trial != .inProcess, SMBChildWriter.canWaitForChildren,
        let pid = try? context.forkClaim(of: root + final, recording: record, to: file)
      else {
        // No child (fork failed, or SIGCHLD is ignored and its status would be lost): create
        // and record here, where a kill between the two leaves an unrecorded claim.
        return try claimHere(final, recording: record, in: manifest)
      }
      if trial == .crashOnceCreated { return abandon(pid, once: final) }
      // The child takes one connection, a create and a flush, bounded by its alarm: waiting
      // for it here holds only the SMB lane.
      var status: Int32 = 0
      do throws(SystemError) {
        try Syscall.blocking("waitpid") { waitpid(pid, &status, 0) }
      } catch {
        throw failure(error, .modify, final)
      }
      let code = status & 0x7f == 0 ? (status >> 8) & 0xff : EIO  // WIFEXITED, WEXITSTATUS
      switch code {
      case 0: return .claimed
      case EEXIST: return .taken
      default: throw failure(SystemError(call: "smbc_open", code: code), .modify, final)
      }
    }
    switch outcome {
    case .claimed: return true
    case .taken: return false
    case .crashed: throw SimulatedCrash()
    }
  }

  /// The manifest open for appending, with an exclusive `flock` held through its descriptor.
  fileprivate static func lockedManifest(_ path: String) throws(ForwardFailure) -> Int32 {
    do throws(SystemError) {
      let file = try Syscall.blocking("open") { Glibc.open(path, O_WRONLY | O_APPEND | O_CLOEXEC) }
      // A file system without flock (ENOLCK, EOPNOTSUPP): the child still records, but a
      // resume does not wait for it.
      _ = try? Syscall.blocking("flock") { flock(file, LOCK_EX) }
      return file
    } catch {
      throw ForwardFailure(
        kind: .sourceUnreadable, place: .source, item: Manifest.fileName, errno: error.code)
    }
  }

  /// The claim without a child: the create, then the record; a record that fails removes the
  /// file just created (the one file this attempt knows it made).
  fileprivate func claimHere(
    _ final: RelativePath, recording record: [UInt8], in manifest: String
  ) throws(ForwardFailure) -> ClaimOutcome {
    let claim: SMBFile
    do throws(SystemError) {
      // O_EXCL is atomic on the server (and case-insensitive where the share is).
      claim = try context.open(root + final, flags: O_WRONLY | O_CREAT | O_EXCL)
    } catch  where error.code == EEXIST || error.code == EISDIR {
      return .taken
    } catch {
      throw failure(error, .modify, final)
    }
    do throws(SystemError) {
      try Durable.append(record, to: manifest)
    } catch {
      try? context.close(claim)
      try? context.unlink(root + final)
      throw ForwardFailure(
        kind: .sourceUnreadable, place: .source, item: Manifest.fileName, errno: error.code)
    }
    try? context.close(claim)  // An empty file: a failed close loses nothing.
    return .claimed
  }

  /// The ``ClaimTrial/crashOnceCreated`` seam: once the server has the file (checked on this connection,
  /// every 10 ms for at most 10 s: the parent has no event for the child's create), the child
  /// is left to record it on its own, as after a kill of this process; a thread of its own
  /// reaps it.
  fileprivate func abandon(_ pid: pid_t, once final: RelativePath) -> ClaimOutcome {
    for _ in 0..<1000 {
      if (try? context.stat(root + final)) != nil { break }
      usleep(10_000)
    }
    let reap: @Sendable () -> Void = {
      var status: Int32 = 0
      _ = try? Syscall.blocking("waitpid") { waitpid(pid, &status, 0) }
    }
    do { try SystemThread.start(name: "bd-claim-reaper", reap) } catch { reap() }
    return .crashed
  }
}

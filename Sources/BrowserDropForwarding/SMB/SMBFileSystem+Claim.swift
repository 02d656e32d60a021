import BrowserDropSystem
internal import CSMBClientLoader
import Glibc

/// Claiming a final name: the exclusive create and its record in the manifest as one step, in
/// the delivery's claim child (``SMBClaimChild``), which finishes it even when this process is
/// killed in between.
extension SMBFileSystem {
  /// What became of a claim on the SMB thread.
  fileprivate enum ClaimOutcome: Sendable {
    case claimed, taken, crashed
    /// Sent, and its answer lost: the create may have happened.
    case lost(ForwardFailure)
  }

  /// Whether a create that failed with `code` may have been carried out all the same: the
  /// connection failed or timed out rather than the server answering.
  fileprivate static func answerMayBeLost(_ code: Int32) -> Bool {
    [ETIMEDOUT, ECONNRESET, ECONNABORTED, ENOTCONN, EPIPE, EIO, ESHUTDOWN, EHOSTUNREACH]
      .contains(code)
  }

  func claim(
    _ final: RelativePath, recording record: [UInt8], token: [UInt8], in manifest: String,
    trial: ClaimTrial?
  ) async throws -> Bool {
    let outcome = try await DedicatedThread.smb.run {
      [self] () throws(ForwardFailure) -> ClaimOutcome in
      guard trial != .inProcess, trial != .crashInProcessOnceCreated,
        SMBChildWriter.canWaitForChildren
      else {
        return try claimHere(
          final, recording: record, token: token, lockingFirst: manifest,
          crashOnceCreated: trial == .crashInProcessOnceCreated)
      }
      let url = context.url(root + final)
      if trial == .crashOnceCreated {
        let abandoned = try claimChild.abandon(
          url, recording: record, token: token, in: manifest, context: context,
          lockedManifest: Self.lockedManifest
        ) { (try? context.stat(root + final)) != nil }
        return abandoned
          ? .crashed
          : try claimHere(final, recording: record, token: token, lockingFirst: manifest)
      }
      // The child answers after one create and one flush (bounded by its alarm): waiting for
      // it here holds only the SMB lane.
      switch try claimChild.claim(
        url, recording: record, token: token, in: manifest, context: context,
        lockedManifest: Self.lockedManifest)
      {
      case .answered(0): return .claimed
      case .answered(EEXIST): return .taken
      case .answered(let code):
        throw failure(SystemError(call: "smbc_open", code: code), .modify, final)
      case .notSent:
        // No child (fork failed, or it is gone and none could be started): nothing was asked,
        // so create and record here, where a kill between the two leaves an unrecorded claim.
        return try claimHere(final, recording: record, token: token, lockingFirst: manifest)
      case .lost:
        return .lost(failure(SystemError(call: "smbc_open", code: EIO), .modify, final))
      }
    }
    switch outcome {
    case .claimed: return true
    case .taken: return false
    case .crashed: throw SimulatedCrash()
    case .lost(let failure): throw ClaimAnswerLost(failure: failure)
    }
  }

  /// The manifest open for appending (and reading: a record's append reads the last byte), with
  /// an exclusive `flock` held through its descriptor.
  ///
  /// Only tried (`LOCK_NB`), never waited for: this runs on the one SMB lane, which a wait
  /// would stall for every delivery of the process. The folder's lock (``FolderLock``) keeps
  /// other deliveries of this folder out, so the one holder can be the claim child of a
  /// delivery that was killed, finishing its last record: `folderBusy` then, before any claim
  /// is sent, and the next try finds it gone.
  static func lockedManifest(_ path: String) throws(ForwardFailure) -> Int32 {
    let file: Int32
    do throws(SystemError) {
      file = try Syscall.blocking("open") { Glibc.open(path, O_RDWR | O_APPEND | O_CLOEXEC) }
    } catch {
      throw ForwardFailure(
        kind: .sourceUnreadable, place: .source, item: Manifest.fileName, errno: error.code)
    }
    // A file system without flock (ENOLCK, EOPNOTSUPP): the child still records, but a resume
    // does not wait for it.
    if (try? Syscall.nonBlocking("flock", { flock(file, LOCK_EX | LOCK_NB) })) == .some(nil) {
      Glibc.close(file)
      throw ForwardFailure(kind: .folderBusy, place: .source, item: Manifest.fileName)
    }
    return file
  }

  /// The claim without a child, under the manifest's lock (so a reader in another process
  /// does not read between the two steps while this process lives).
  fileprivate func claimHere(
    _ final: RelativePath, recording record: [UInt8], token: [UInt8],
    lockingFirst manifest: String, crashOnceCreated: Bool = false
  ) throws(ForwardFailure) -> ClaimOutcome {
    let file = try Self.lockedManifest(manifest)
    defer { Glibc.close(file) }
    return try claimHere(
      final, recording: record, token: token, in: manifest, crashOnceCreated: crashOnceCreated)
  }

  /// The claim without a child: the create, then the record, then the token through the
  /// create's handle; a record that fails removes the file just created (the one file this
  /// attempt knows it made). `crashOnceCreated` (tests) ends it between the create and the
  /// record.
  fileprivate func claimHere(
    _ final: RelativePath, recording record: [UInt8], token: [UInt8], in manifest: String,
    crashOnceCreated: Bool
  ) throws(ForwardFailure) -> ClaimOutcome {
    let claim: SMBFile
    do throws(SystemError) {
      // O_EXCL is atomic on the server (and case-insensitive where the share is).
      claim = try context.open(root + final, flags: O_WRONLY | O_CREAT | O_EXCL)
    } catch  where error.code == EEXIST || error.code == EISDIR {
      return .taken
    } catch  where Self.answerMayBeLost(error.code) {
      return .lost(failure(error, .modify, final))
    } catch {
      throw failure(error, .modify, final)
    }
    if crashOnceCreated {
      try? context.close(claim)
      return .crashed
    }
    do throws(SystemError) {
      try Durable.append(record, to: manifest)
    } catch {
      try? context.close(claim)
      try? context.unlink(root + final)
      throw ForwardFailure(
        kind: .sourceUnreadable, place: .source, item: Manifest.fileName, errno: error.code)
    }
    // A write that fails leaves the claim empty; the delivery reads its size.
    token.withUnsafeBytes { bytes in _ = try? context.write(claim, bytes) }
    try? context.close(claim)  // A claim: a failed close loses nothing.
    return .claimed
  }
}

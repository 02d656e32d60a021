import BrowserDropSystem
public import FoundationEssentials
import Glibc

/// Delivers a finished folder to a ``Destination``, file by file, without losing or duplicating
/// anything.
///
/// Each file is streamed in bounded chunks to a hidden temporary name next to its final place,
/// then moved into place only when complete; the final name is chosen race-free under the
/// ``CollisionPolicy``. A manifest inside the source folder records what arrived, so calling
/// again after a failure finishes the job without sending a file twice. The source folder is
/// removed only once every file has arrived and its size (or SHA-256) has been checked.
public struct Forwarder: Sendable {
  /// A forwarder. It holds no state; one is as good as another.
  public init() {}

  /// Tests only: where a delivery ends as if the process had been killed there.
  var crashPoint: Checkpoint?
  /// Tests only: runs right before each claim (SMB) is sent; e.g. to stop the server there.
  var beforeClaim: (@Sendable () async -> Void)?
  /// Tests only: runs right after a claim and its record (SMB), before anything else touches
  /// the share; e.g. to stop the server there.
  var afterClaim: (@Sendable () async -> Void)?
  /// Tests only: how SMB claims are made (``ClaimTrial``); nil for the claim child.
  var claimTrial: ClaimTrial?
  /// Tests only: runs once a resume has looked at what an earlier attempt of a file left,
  /// before anything is sent again; e.g. to carry out a request a stalled server held.
  var afterResumeLook: (@Sendable () async -> Void)?

  /// Delivers `folder` into `destination` and returns what happened.
  ///
  /// Cancelling the calling task stops at the next chunk; files already in place stay, and the
  /// next call finishes the rest.
  /// - Parameters:
  ///   - progress: Called after every chunk and every file; the delivery waits for it.
  /// - Throws: ``ForwardFailure`` (or `CancellationError`).
  public func forward(
    folder: URL, to destination: some Destination, policy: CollisionPolicy = .rename,
    verify: Verification = .size,
    progress: @escaping @Sendable (ForwardProgress) async -> Void = { _ in }
  ) async throws -> ForwardReport {
    guard let backend = destination as? any DestinationBackend else {
      throw ForwardFailure(kind: .invalidDestination, place: .address(destination.description))
    }
    let folderPath = folder.standardizedFileURL.path
    // Held until the folder is gone (or the delivery failed): one delivery of it at a time.
    let lock = try await FolderLock.acquire(folderPath)
    do {
      let report = try await forward(
        folderPath, to: destination, backend: backend, policy: policy, verify: verify,
        progress: progress)
      await lock.release()
      return report
    } catch {
      await lock.release()
      throw error
    }
  }

  /// ``forward(folder:to:policy:verify:progress:)`` under the folder's lock.
  private func forward(
    _ folderPath: String, to destination: some Destination, backend: any DestinationBackend,
    policy: CollisionPolicy, verify: Verification,
    progress: @escaping @Sendable (ForwardProgress) async -> Void
  ) async throws -> ForwardReport {
    let tree = try await SourceTree.scan(folderPath)
    let manifest = try await Manifest.load(
      folder: folderPath, destination: backend.manifestIdentity)
    let fileSystem = try await backend.open()
    var run = DeliveryRun(
      fileSystem: fileSystem, policy: policy, verify: verify, reportProgress: progress,
      crashPoint: crashPoint, beforeClaim: beforeClaim, afterClaim: afterClaim,
      claimTrial: claimTrial, afterResumeLook: afterResumeLook, manifest: manifest,
      progress: ForwardProgress(
        completedFiles: 0, totalFiles: tree.fileCount, completedBytes: 0,
        totalBytes: tree.byteCount))
    let leftovers: [ForwardReport.PossibleLeftover]
    do {
      await progress(run.progress)
      try await run.deliver(tree.root, into: [])
      leftovers = await run.confirmedLeftovers()
      await run.removeEarlierMarkers()
    } catch {
      // A simulated crash (tests) leaves the run's marker on the share, as a kill would.
      await fileSystem.close(releasingMarker: !(error is SimulatedCrash))
      throw error
    }
    await fileSystem.close()
    try await DedicatedThread.localIO.run {
      do { try Self.removeDeliveredFolder(folderPath) } catch {
        throw ForwardFailure(kind: .sourceUnreadable, place: .source, item: folderPath, errno: EIO)
      }
    }
    // A name this run delivered to was free after all (removed meanwhile): not a leftover.
    let delivered = Set(run.delivered.map(\.destination))
    return ForwardReport(
      destination: destination.description, files: run.delivered, renames: run.renames,
      resumedFiles: run.resumed, bytesSent: run.bytesSent,
      possibleLeftovers: leftovers.filter { !delivered.contains($0.path) })
  }

  /// Removes a delivered folder with its manifest last: a stop part-way through the removal
  /// leaves the manifest saying where every remaining file went, so the next run sends none of
  /// them again (recursive removal in directory order could delete the manifest first).
  static func removeDeliveredFolder(_ path: String) throws {
    let manager = FileManager.default
    // The lock file goes last too: while it is there, another delivery of the folder fails.
    for name in try manager.contentsOfDirectory(atPath: path)
    where name != Manifest.fileName && name != FolderLock.fileName {
      try manager.removeItem(atPath: path + "/" + name)
    }
    try manager.removeItem(atPath: path)
  }

  /// Delivers `folder` into `destination`, as a stream of progress ending with the report.
  ///
  /// The stream throws ``ForwardFailure`` (or `CancellationError`). Stopping iteration cancels
  /// the delivery. If the consumer falls behind, older progress values are dropped; the final
  /// ``ForwardEvent/finished(_:)`` never is.
  public func deliver(
    folder: URL, to destination: some Destination, policy: CollisionPolicy = .rename,
    verify: Verification = .size
  ) -> AsyncThrowingStream<ForwardEvent, any Error> {
    let (stream, continuation) = AsyncThrowingStream<ForwardEvent, any Error>.makeStream(
      bufferingPolicy: .bufferingNewest(64))
    let task = Task {
      do {
        let report = try await forward(
          folder: folder, to: destination, policy: policy, verify: verify
        ) { continuation.yield(.progress($0)) }
        continuation.yield(.finished(report))
        continuation.finish()
      } catch {
        continuation.finish(throwing: error)
      }
    }
    continuation.onTermination = { _ in task.cancel() }
    return stream
  }
}

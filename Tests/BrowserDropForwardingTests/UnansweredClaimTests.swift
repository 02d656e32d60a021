import BrowserDropTestSupport
import Foundation
import Glibc
import Testing

@testable import BrowserDropForwarding

/// `unanswered` says a claim's create may have happened with its answer lost. A claim that got
/// a definite answer (the server refused it) or failed before it was sent proves nothing was
/// created, and is not recorded so: only a lost answer (``ClaimAnswerLost``) is.
@Suite("Which failed claims are recorded as unanswered")
struct UnansweredClaimTests {
  /// A local folder that claims names as SMB does, with every claim failing as `lost` says.
  struct FailingClaims: DestinationFileSystem {
    let local: LocalFileSystem
    let lost: Bool

    var place: ForwardFailure.Place { local.place }
    var restrictsNames: Bool { false }
    var needsClaim: Bool { true }
    func entry(at path: RelativePath) async throws -> EntryKind? {
      try await local.entry(at: path)
    }
    func makeDirectory(at path: RelativePath) async throws -> Bool {
      try await local.makeDirectory(at: path)
    }
    func fileID(at path: RelativePath) async throws -> FileID? {
      try await local.fileID(at: path)
    }
    func upload(
      _ source: SourceFile, to temporary: RelativePath, progress: @Sendable (Int64) async -> Void
    ) async throws -> UInt64 {
      try await local.upload(source, to: temporary, progress: progress)
    }
    func claim(
      _ final: RelativePath, recording record: [UInt8], token: [UInt8], in manifest: String,
      trial: ClaimTrial?
    ) async throws -> Bool {
      let failure = ForwardFailure(
        kind: lost ? .connectionLost : .readOnly, place: place, item: final.joined(), errno: EIO)
      if lost { throw ClaimAnswerLost(failure: failure) }
      throw failure
    }
    func install(
      _ temporary: RelativePath, at final: RelativePath, replacing: Bool, claim: UInt64?
    ) async throws -> Bool {
      try await local.install(temporary, at: final, replacing: replacing, claim: claim)
    }
    func fence(_ temporary: RelativePath, aside: RelativePath) async throws -> Fence {
      try await local.fence(temporary, aside: aside)
    }
    func isSettled(_ path: RelativePath) async throws -> Bool {
      try await local.isSettled(path)
    }
    func leadingBytes(of path: RelativePath, limit: Int) async throws -> [UInt8]? {
      try await local.leadingBytes(of: path, limit: limit)
    }
    func holdMarker(_ path: RelativePath) async throws {
      try await local.holdMarker(path)
    }
    func isReleased(marker path: RelativePath) async throws -> Bool {
      try await local.isReleased(marker: path)
    }
    func removeMarker(_ path: RelativePath) async -> Bool { await local.removeMarker(path) }
    func removeReleasedMarkers(except own: RelativePath?, stillHeld: [RelativePath]) async {
      await local.removeReleasedMarkers(except: own, stillHeld: stillHeld)
    }
    func removeQuietly(_ path: RelativePath) async { await local.removeQuietly(path) }
    func sha256(at path: RelativePath) async throws -> [UInt8] {
      try await local.sha256(at: path)
    }
    func close(releasingMarker: Bool) async {}
  }

  @Test("Only a lost answer is recorded as unanswered", arguments: [false, true])
  func onlyALostAnswer(lost: Bool) async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let inbox = scratch.root.appendingPathComponent("inbox")
    try FileManager.default.createDirectory(at: inbox, withIntermediateDirectories: true)
    let batch = try scratch.folder("batch", ["x.txt": Data("ex".utf8)])
    let tree = try await SourceTree.scan(batch.path)
    var run = DeliveryRun(
      fileSystem: FailingClaims(local: LocalFileSystem(root: inbox.path), lost: lost),
      policy: .rename, verify: .size, reportProgress: { _ in }, crashPoint: nil,
      beforeClaim: nil, afterClaim: nil, claimTrial: nil, afterResumeLook: nil,
      manifest: try await Manifest.load(folder: batch.path, destination: "test"),
      progress: ForwardProgress(completedFiles: 0, totalFiles: 1, completedBytes: 0, totalBytes: 2))
    await #expect(throws: ForwardFailure.self) {
      try await run.deliver(tree.root, into: [])
    }
    let records = try String(
      contentsOf: batch.appendingPathComponent(Manifest.fileName), encoding: .utf8)
    #expect(records.contains(#""state":"unanswered""#) == lost, "\(records)")
    #expect(try contents(of: inbox).isEmpty, "the temporary file is removed")
  }
}

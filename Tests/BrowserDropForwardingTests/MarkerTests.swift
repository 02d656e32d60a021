import BrowserDropTestSupport
import Foundation
import Glibc
import Testing

@testable import BrowserDropForwarding

/// A run's marker proves that no request of the run can still be carried out only if every
/// request after it goes over the connection that holds it: libsmbclient silently opens a new
/// connection at the next call once it finds the cached one dead, so a context that holds its
/// marker keeps its one connection instead (its requests then fail, and the run with them). A
/// relay of the test's own stands between the context and the loopback smbd and cuts the
/// connection as a network would.
@Suite("A run's marker and its one connection (SMB)", .serialized)
struct MarkerTests {
  /// A number set from a closure.
  final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var stored = 0
    var value: Int {
      get { lock.withLock { stored } }
      set { lock.withLock { stored = newValue } }
    }
  }

  /// Looks at the destination's root twice (the first request after a cut may still go out on
  /// the dead connection); whether each look succeeded.
  private static func lookTwice(_ fileSystem: SMBFileSystem) async -> [Bool] {
    var results: [Bool] = []
    for _ in 0..<2 {
      do {
        _ = try await fileSystem.entry(at: [])
        results.append(true)
      } catch {
        results.append(false)
      }
    }
    return results
  }

  @Test func beforeItsMarkerTheContextReplacesACutConnection() async throws {
    let server = try TestSMBServer.fromEnvironment()
    let relay = try TCPRelay(to: server.port)
    defer { relay.stop() }
    let destination = try SMBDestination(
      "smb://127.0.0.1:\(relay.port)/guest/\(uniqueName("unpinned"))", credentials: nil,
      options: SMBOptions(timeout: .seconds(10)))
    let fileSystem = try await SMBFileSystem.connect(to: destination)
    #expect(relay.accepted == 1)
    relay.cut()
    let looks = await Self.lookTwice(fileSystem)
    #expect(looks.last == true, "\(looks)")
    #expect(relay.accepted == 2, "a new connection")
    await fileSystem.close()
  }

  @Test func onceItHoldsItsMarkerTheContextKeepsItsConnectionAndTheCutReleasesTheMarker()
    async throws
  {
    let server = try TestSMBServer.fromEnvironment()
    let relay = try TCPRelay(to: server.port)
    defer { relay.stop() }
    let name = uniqueName("pinned")
    let destination = try SMBDestination(
      "smb://127.0.0.1:\(relay.port)/guest/\(name)", credentials: nil,
      options: SMBOptions(timeout: .seconds(10)))
    let fileSystem = try await SMBFileSystem.connect(to: destination)
    let marker = [NameRules.markerName()]
    try await fileSystem.holdMarker(marker)
    let other = try await SMBFileSystem.connect(to: try server.destination("guest", name))
    #expect(try await other.isReleased(marker: marker) == false, "held by the run's connection")
    relay.cut()
    #expect(await Self.lookTwice(fileSystem) == [false, false])
    #expect(relay.accepted == 1, "no second connection")
    // The server closes the cut connection's handles once it sees the connection end (a moment
    // later): the marker is then released, and nothing of the run can come any more.
    var released = false
    for _ in 0..<40 where !released {
      released = try await other.isReleased(marker: marker)
      if !released { try await Task.sleep(for: .milliseconds(50)) }
    }
    #expect(released)
    await fileSystem.close()
    #expect(relay.accepted == 1, "nor for the end of the run")
    await other.close()
  }

  /// End to end: the connection is cut right after the run's first claim. The run fails (it
  /// does not go on over a new connection), and the next one delivers the file once, under its
  /// own name, removing the claim (its token) and the failed run's marker.
  @Test func aRunWhoseConnectionIsCutFailsAndTheNextDeliversOnce() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let server = try TestSMBServer.fromEnvironment()
    let relay = try TCPRelay(to: server.port)
    defer { relay.stop() }
    let name = uniqueName("cut")
    let destination = try SMBDestination(
      "smb://127.0.0.1:\(relay.port)/guest/\(name)", credentials: nil,
      options: SMBOptions(timeout: .seconds(10)))
    let mine = Data("cut after the claim".utf8)
    let batch = try scratch.folder("batch", ["x.txt": mine])
    var cutting = Forwarder()
    let before = Counter()
    cutting.afterClaim = {
      before.value = relay.accepted
      relay.cut()
    }
    await #expect(throws: ForwardFailure.self) {
      _ = try await cutting.forward(folder: batch, to: destination)
    }
    // The run's own connection and its claim child's.
    #expect(before.value == 2)
    #expect(relay.accepted == 2, "no new connection within the run, nor at its end")
    let report = try await Forwarder().forward(folder: batch, to: destination, verify: .sha256)
    #expect(try contents(of: server.directory("guest/\(name)")) == ["x.txt": mine])
    #expect(report.files.map(\.destination) == ["x.txt"])
    #expect(report.possibleLeftovers.isEmpty)
  }

  /// A marker whose run's next delivery found it still held (the server had not yet closed a
  /// killed run's connection) is forgotten with that delivery's manifest; a later delivery
  /// into the same root removes it once released: the first one of a process lists the root,
  /// later ones try again what they found held. A run still holding its marker keeps it (the
  /// server refuses its removal). Names that only look like markers stay.
  @Test func aDeliveryRemovesReleasedMarkersAndLeavesHeldOnes() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let server = try TestSMBServer.fromEnvironment()
    let name = uniqueName("sweep")
    let destination = try server.destination("guest", name)
    let share = server.directory("guest/\(name)")
    let held = [NameRules.markerName()]
    let left = [NameRules.markerName()]
    let holding = try await SMBFileSystem.connect(to: destination)
    try await holding.holdMarker(held)
    // A run that ended without removing its marker (as a kill leaves it, released at once
    // here rather than when smbd tears the connection down).
    let ended = try await SMBFileSystem.connect(to: destination)
    try await ended.holdMarker(left)
    await ended.close(releasingMarker: false)
    let lookalike = ".browserdrop-00000000000000AB.live"
    try Data().write(to: share.appending(path: lookalike))
    let names = { try FileManager.default.contentsOfDirectory(atPath: share.path).sorted() }

    let first = try scratch.folder("first", ["x.txt": Data("delivered".utf8)])
    _ = try await Forwarder().forward(folder: first, to: destination)
    #expect(try names() == [held[0], lookalike, "x.txt"].sorted())

    // Its holder lets go without removing it; the next delivery (no listing now) removes it.
    await holding.close(releasingMarker: false)
    let second = try scratch.folder("second", ["y.txt": Data("also".utf8)])
    _ = try await Forwarder().forward(folder: second, to: destination)
    #expect(try names() == [lookalike, "x.txt", "y.txt"].sorted())
  }
}

/// smbd checks that a rename's target is free and then renames: two steps, so another writer's
/// rename can replace a claim that was created in between. The claim is then that writer's
/// file, which a check by size alone took for the claim when it was empty (the fleet soak lost
/// an empty file that way: the move over the "claim" deleted it). Only the attempt's token,
/// read back, proves a claim. Played here by a second connection that renames its own file
/// over the claim right after the claim child made it.
@Suite("A claim replaced right after its create (SMB)", .serialized)
struct ReplacedClaimTests {
  @Test(arguments: [Data(), Data(repeating: UInt8(ascii: "a"), count: NameRules.claimTokenLength)])
  func anotherWritersFileAtTheNameIsNeverTakenForTheClaim(theirs: Data) async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let (destination, folder) = try CrashResumeTests.destination(.smb, scratch)
    let mine = Data("mine, sent once".utf8)
    let batch = try scratch.folder("batch", ["x.txt": mine])
    let other = try await LateRenameTests.OtherConnection(
      try #require(destination as? SMBDestination))
    var forwarder = Forwarder()
    forwarder.afterClaim = {
      try? await other.write(".theirs", theirs)
      _ = await other.rename(".theirs", to: "x.txt")
    }
    let report = try await forwarder.forward(folder: batch, to: destination, verify: .sha256)
    await other.free()
    #expect(try contents(of: folder) == ["x.txt": theirs, "x 2.txt": mine])
    #expect(report.files.map(\.destination) == ["x 2.txt"])
  }

  /// A kill right after the claim child's record: the resume finds a claim recorded without
  /// its id, and removes the file at the name only when it holds the attempt's token.
  @Test func aKillAfterTheClaimsRecordLeavesAnotherWritersFileAlone() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let (destination, folder) = try CrashResumeTests.destination(.smb, scratch)
    let mine = Data("mine, after the kill".utf8)
    let batch = try scratch.folder("batch", ["x.txt": mine])
    let other = try await LateRenameTests.OtherConnection(
      try #require(destination as? SMBDestination))
    var crashing = Forwarder.stopping(at: .claimRecorded)
    crashing.afterClaim = {
      try? await other.write(".theirs", Data())
      _ = await other.rename(".theirs", to: "x.txt")
    }
    await #expect(throws: SimulatedCrash.self) {
      _ = try await crashing.forward(folder: batch, to: destination)
    }
    await other.free()
    let report = try await Forwarder().forward(folder: batch, to: destination, verify: .sha256)
    #expect(try contents(of: folder) == ["x.txt": Data(), "x 2.txt": mine])
    #expect(report.files.map(\.destination) == ["x 2.txt"])
    #expect(
      report.possibleLeftovers.map { "\($0.path) \($0.reason)" } == ["x.txt claimAnswerLost"])
  }

  /// Without the replacement, the same kill: the claim holds the token and goes.
  @Test func aKillAfterTheClaimsRecordLeavesNothingBehind() async throws {
    let run = try await LateRenameTests.EndedForward(
      "mine, after the kill", endedAt: .claimRecorded)
    defer { run.scratch.remove() }
    let report = try await run.resume()
    #expect(try contents(of: run.folder) == ["x.txt": run.mine])
    #expect(report.files.map(\.destination) == ["x.txt"])
    #expect(report.possibleLeftovers.isEmpty)
  }
}

import BrowserDropTestSupport
import Foundation
import Testing

@testable import BrowserDropForwarding

/// The connection drops while a file that is already at its final name is being checked (read
/// back, or its id looked up): the delivery fails, and the next forward must take that file
/// for its own (its id and size, and with `.sha256` its bytes, prove it) rather than send it
/// again under the next free name. Seen in the fleet test with an smbd outage: the check's
/// failure recorded `abandoned`, which kept the resume from proving the file, so the share
/// ended with two copies.
@Suite("A check cut off by a lost connection")
struct CheckInterruptedTests {
  @Test(
    "The resume accepts the installed file: one copy, nothing sent twice",
    arguments: CrashResumeTests.Place.allCases, [Verification.size, .sha256])
  func resumeAcceptsTheInstalledFile(
    place: CrashResumeTests.Place, verify: Verification
  ) async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let (destination, folder) = try CrashResumeTests.destination(place, scratch)
    let mine = Data("the kiosk's own bytes".utf8)
    let batch = try scratch.folder("batch", ["x.txt": mine])
    await #expect(throws: ForwardFailure.self) {
      _ = try await Forwarder.stopping(at: .checkFails).forward(
        folder: batch, to: destination, verify: verify)
    }
    #expect(try contents(of: folder) == ["x.txt": mine], "installed before the check failed")

    let report = try await Forwarder().forward(folder: batch, to: destination, verify: verify)
    let found = try contents(of: folder)
    #expect(found == ["x.txt": mine], "\(found.keys.sorted())")
    #expect(report.files.map(\.destination) == ["x.txt"])
    #expect(report.resumedFiles == 1)
    #expect(report.possibleLeftovers.isEmpty)
  }

  /// A file the interrupted run installed under a number is reported as renamed by the resume
  /// that takes it, as the install would have reported it.
  @Test(arguments: CrashResumeTests.Place.allCases)
  func aResumedFileKeepsItsRename(place: CrashResumeTests.Place) async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let (destination, folder) = try CrashResumeTests.destination(place, scratch)
    let theirs = try scratch.folder("other", ["x.txt": Data("someone else's".utf8)])
    _ = try await Forwarder().forward(folder: theirs, to: destination)
    let mine = Data("the kiosk's own bytes".utf8)
    let batch = try scratch.folder("batch", ["x.txt": mine])
    await #expect(throws: ForwardFailure.self) {
      _ = try await Forwarder.stopping(at: .checkFails).forward(folder: batch, to: destination)
    }
    let report = try await Forwarder().forward(folder: batch, to: destination)
    #expect(report.resumedFiles == 1)
    #expect(
      report.renames.map { "\($0.source) → \($0.destination) \($0.reason)" } == [
        "x.txt → x 2.txt nameTaken"
      ])
    #expect(try contents(of: folder)["x 2.txt"] == mine)
  }
}

/// libsmbclient's rename over the claim answers `EEXIST` (its first rename's answer) whatever
/// ended its delete of the claim and its second rename, and the connection can fail right
/// after. From the `claimed` record with the claim's id on, a move may have been sent: the
/// resume takes the file when the move went through (the uploaded id proves it); otherwise it
/// removes the claim only when the claim holds the attempt's token (another writer's claim can
/// carry its inode number, never its token) and the run that sent the move has released its
/// marker (no delete or rename of that run can still come). A move refused before libsmbclient
/// deleted anything (`moveFailed`) leaves the claim provably in place, and the resume removes
/// it. (A marker still held: `LateRenameTests`.)
@Suite("A move over the claim whose answer was lost (SMB)")
struct MoveAnswerLostTests {
  @Test func theMoveWentThroughAndTheResumeTakesTheFile() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let (destination, folder) = try CrashResumeTests.destination(.smb, scratch)
    let mine = Data("moved before the connection failed".utf8)
    let batch = try scratch.folder("batch", ["x.txt": mine])
    await #expect(throws: ForwardFailure.self) {
      _ = try await Forwarder.stopping(at: .moveAnswerLostAfterMove).forward(
        folder: batch, to: destination)
    }
    let report = try await Forwarder().forward(folder: batch, to: destination, verify: .sha256)
    #expect(try contents(of: folder) == ["x.txt": mine])
    #expect(report.resumedFiles == 1)
    #expect(report.possibleLeftovers.isEmpty)
  }

  @Test func theClaimThatStayedIsProvedByItsTokenAndRemoved() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let (destination, folder) = try CrashResumeTests.destination(.smb, scratch)
    let mine = Data("sent again under its own name".utf8)
    let batch = try scratch.folder("batch", ["x.txt": mine])
    await #expect(throws: ForwardFailure.self) {
      _ = try await Forwarder.stopping(at: .moveAnswerLostBeforeMove).forward(
        folder: batch, to: destination)
    }
    // The run's own give-up fenced and removed its upload; its marker went with the run.
    #expect(
      try destinationContents(of: folder) == ["x.txt": aClaim], "the claim, nothing else")
    let report = try await Forwarder().forward(folder: batch, to: destination, verify: .sha256)
    #expect(try contents(of: folder) == ["x.txt": mine])
    #expect(report.files.map(\.destination) == ["x.txt"])
    #expect(report.renames.isEmpty)
    #expect(report.possibleLeftovers.isEmpty)
  }

  /// A source that changed size since changes nothing of that: the claim is removed either way
  /// (by its token after a move may have been sent, by its id after a refused move).
  @Test(arguments: [true, false])
  func aChangedSourceSettlesTheClaimTheSameWay(moveRefused: Bool) async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let (destination, folder) = try CrashResumeTests.destination(.smb, scratch)
    let batch = try scratch.folder("batch", ["x.txt": Data("before".utf8)])
    await #expect(throws: ForwardFailure.self) {
      _ = try await Forwarder.stopping(
        at: moveRefused ? .moveRefused : .moveAnswerLostBeforeMove
      ).forward(folder: batch, to: destination)
    }
    #expect(
      try destinationContents(of: folder) == ["x.txt": aClaim], "the claim, and no temporary file")
    let mine = Data("after, and longer".utf8)
    try mine.write(to: batch.appendingPathComponent("x.txt"))
    let report = try await Forwarder().forward(folder: batch, to: destination, verify: .sha256)
    #expect(try contents(of: folder) == ["x.txt": mine])
    #expect(report.possibleLeftovers.isEmpty)
  }

  @Test func aRefusedMoveLeavesTheClaimWhichTheResumeRemoves() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let (destination, folder) = try CrashResumeTests.destination(.smb, scratch)
    let mine = Data("delivered under its own name".utf8)
    let batch = try scratch.folder("batch", ["x.txt": mine])
    await #expect(throws: ForwardFailure.self) {
      _ = try await Forwarder.stopping(at: .moveRefused).forward(folder: batch, to: destination)
    }
    #expect(
      try destinationContents(of: folder) == ["x.txt": aClaim], "the claim, and no temporary file")
    // A resume stopped after deciding to remove the claim and before its next attempt is
    // recorded has removed nothing: a resume after it acts on the same records, and the name
    // could by then hold another writer's file with the freed inode number.
    await #expect(throws: SimulatedCrash.self) {
      _ = try await Forwarder.stopping(at: .beforeNextAttempt).forward(
        folder: batch, to: destination)
    }
    #expect(try destinationContents(of: folder) == ["x.txt": aClaim], "nothing removed yet")
    let report = try await Forwarder().forward(folder: batch, to: destination, verify: .sha256)
    #expect(try contents(of: folder) == ["x.txt": mine])
    #expect(report.renames.isEmpty)
    #expect(report.possibleLeftovers.isEmpty)
  }
}

import BrowserDropSystem
import BrowserDropTestSupport
import Foundation
import Glibc
import Testing

@testable import BrowserDropForwarding

/// A rename that a stalled smbd carries out after the kiosk gave up on it, played by a second
/// connection of the test's own on the real loopback smbd, which also holds the killed run's
/// marker open, as the stalled connection would. The resume fences the upload (renames it
/// aside, then checks that no other handle is open on it) before it looks at any name, so such
/// a rename either happened before the look or never happens; and while the marker is held it
/// only reports the claim (a delete of it may still come), never removes it.
@Suite("Renames a stalled server carries out late", .serialized)
struct LateRenameTests {
  /// A second SMB connection to the destination: the stalled session's requests.
  final class OtherConnection: Sendable {
    let context: SMBContext
    let root: RelativePath

    init(_ destination: SMBDestination) async throws {
      context = try await DedicatedThread.smb.run { () throws -> SMBContext in
        // libsmbclient is opened by the first delivery to SMB; a test that connects before
        // any delivery of the process (a filtered run) opens it here.
        if let reason = SMBLibrary.load() { throw TestSMBLoadFailure(reason: reason) }
        return try SMBContext(for: destination)
      }
      root = destination.path
    }

    /// Opens the killed run's marker (the one `.browserdrop-<id>.live` in the folder) and keeps
    /// it, as the stalled connection that made it keeps it.
    func holdMarker(in folder: URL) async throws -> SMBFile {
      let marker = try #require(
        try contents(of: folder).keys.first {
          $0.hasPrefix(".browserdrop-") && $0.hasSuffix(".live")
        })
      return try await open(marker)
    }

    /// `smbc_unlink` of `name`, as libsmbclient's delete of the claim before its second rename;
    /// the errno it failed with, 0 when done.
    func remove(_ name: String) async -> Int32 {
      await DedicatedThread.smb.run { [context, root] () -> Int32 in
        do throws(SystemError) {
          try context.unlink(root + [name])
          return 0
        } catch {
          return error.code
        }
      }
    }

    /// Creates `name` holding `bytes` (it must not exist).
    func write(_ name: String, _ bytes: Data) async throws {
      try await DedicatedThread.smb.run { [context, root] () throws -> Void in
        let file = try context.open(root + [name], flags: O_WRONLY | O_CREAT | O_EXCL)
        try bytes.withUnsafeBytes { try context.write(file, $0) }
        try context.close(file)
      }
    }

    /// Removes `name` (as libsmbclient's delete of a claim does) and creates it anew holding
    /// `bytes`, as another writer's claim that took the freed name.
    func replace(_ name: String, with bytes: Data) async throws {
      try await DedicatedThread.smb.run { [context, root] () throws -> Void in
        try context.unlink(root + [name])
        let file = try context.open(root + [name], flags: O_WRONLY | O_CREAT | O_EXCL)
        try bytes.withUnsafeBytes { try context.write(file, $0) }
        try context.close(file)
      }
    }

    /// `smbc_rename`, which replaces what is at `to` (a claim), as libsmbclient's second rename
    /// does once its delete of the claim went through; the errno it failed with, 0 when done.
    func rename(_ from: String, to: String) async -> Int32 {
      await DedicatedThread.smb.run { [context, root] () -> Int32 in
        do throws(SystemError) {
          try context.rename(root + [from], to: root + [to])
          return 0
        } catch {
          return error.code
        }
      }
    }

    /// Opens `name` and keeps the handle, as a stalled request keeps the one it opened: for
    /// writing (`O_RDWR`) unless `flags` say otherwise.
    func open(_ name: String, flags: Int32 = O_RDWR) async throws -> SMBFile {
      try await DedicatedThread.smb.run { [context, root] () throws -> SMBFile in
        try context.open(root + [name], flags: flags)
      }
    }

    func close(_ file: SMBFile) async {
      _ = await DedicatedThread.smb.run { [context] in try? context.close(file) }
    }

    func free() async {
      await DedicatedThread.smb.run { [context] in context.free() }
    }
  }

  struct TestSMBLoadFailure: Error { let reason: String }

  final class Outcome: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Int32?
    var code: Int32? {
      get { lock.withLock { value } }
      set { lock.withLock { value = newValue } }
    }
  }

  /// A batch of one `x.txt` whose forward to the loopback smbd ended at a checkpoint (a kill,
  /// or an answer lost): what each test starts from. The test removes `scratch`.
  struct EndedForward {
    let scratch: Scratch
    let destination: SMBDestination
    /// The destination folder, on the server's side.
    let folder: URL
    let batch: URL
    /// What `x.txt` holds.
    let mine: Data

    /// Forwards a batch holding `mine` as `x.txt` and ends it at `checkpoint`, which must end
    /// it with `ending` (a simulated crash unless said otherwise).
    /// The destination is a new folder of the guest share unless `share` names another place
    /// (a destination and its folder on the server's side).
    init<Ending: Error>(
      _ mine: String, endedAt checkpoint: Checkpoint,
      with ending: Ending.Type = SimulatedCrash.self,
      share: (() throws -> (SMBDestination, URL))? = nil
    ) async throws {
      scratch = try Scratch()
      if let share {
        (destination, folder) = try share()
      } else {
        let (destination, folder) = try CrashResumeTests.destination(.smb, scratch)
        self.destination = try #require(destination as? SMBDestination)
        self.folder = folder
      }
      self.mine = Data(mine.utf8)
      batch = try scratch.folder("batch", ["x.txt": self.mine])
      await #expect(throws: Ending.self) {
        _ = try await Forwarder.stopping(at: checkpoint).forward(
          folder: batch, to: destination)
      }
    }

    /// Forwards the batch again, as the kiosk's resume does (with `forwarder`'s seams).
    func resume(with forwarder: Forwarder = Forwarder()) async throws -> ForwardReport {
      try await forwarder.forward(folder: batch, to: destination, verify: .sha256)
    }

    /// The temporary file the ended attempt left, by name.
    func temporary() throws -> String {
      try #require(try contents(of: folder).keys.first { $0.hasSuffix(".part") })
    }
  }

  @Test func aRenameCarriedOutAfterTheResumeLookedFindsNothingToMove() async throws {
    let run = try await EndedForward(
      "sent once, whatever the server does late", endedAt: .killedBeforeMove)
    defer { run.scratch.remove() }
    let temporary = try run.temporary()
    #expect(
      try destinationContents(of: run.folder)
        == ["x.txt": aClaim, temporary: run.mine, aMarker: Data()])
    let other = try await OtherConnection(run.destination)
    let marker = try await other.holdMarker(in: run.folder)
    let late = Outcome()
    var forwarder = Forwarder()
    forwarder.afterResumeLook = { late.code = await other.rename(temporary, to: "x.txt") }
    let report = try await run.resume(with: forwarder)
    #expect(late.code == ENOENT, "the late rename found the upload gone from its name")
    // Without the fence the late rename puts the upload at x.txt and the resume sends it again.
    // With the marker held, a delete of the claim may still come: reported, not removed, and
    // the marker stays (its removal is refused while the handle lasts).
    #expect(
      try destinationContents(of: run.folder)
        == ["x.txt": aClaim, "x 2.txt": run.mine, aMarker: Data()])
    #expect(report.files.map(\.destination) == ["x 2.txt"])
    #expect(
      report.possibleLeftovers.map { "\($0.path) \($0.reason)" } == ["x.txt claimAnswerLost"])
    // The stalled connection's delete of the claim, carried out late: it takes only the claim.
    // (Had the resume removed the claim and delivered to x.txt, this would delete the file.)
    #expect(await other.remove("x.txt") == 0)
    #expect(try destinationContents(of: run.folder) == ["x 2.txt": run.mine, aMarker: Data()])
    await other.close(marker)
    await other.free()
  }

  /// Once the run that sent the move has released its marker, the claim at the name is its
  /// own only when it holds the attempt's token: another writer's claim that took the name
  /// after libsmbclient's delete (empty, or holding that writer's token) is neither removed
  /// nor reported, and the file arrives under the next number.
  @Test(arguments: [Data(), Data("browserdrop claim 0123456789abcdef\n".utf8)])
  func anotherWritersClaimAtTheNameIsLeftAlone(claim: Data) async throws {
    let run = try await EndedForward("the name went to another writer", endedAt: .killedBeforeMove)
    defer { run.scratch.remove() }
    let other = try await OtherConnection(run.destination)
    try await other.replace("x.txt", with: claim)
    await other.free()
    let report = try await run.resume()
    #expect(try contents(of: run.folder) == ["x.txt": claim, "x 2.txt": run.mine])
    #expect(report.files.map(\.destination) == ["x 2.txt"])
    #expect(report.possibleLeftovers.isEmpty, "\(report.possibleLeftovers)")
  }

  /// A kill in the move window, nothing held: the resume proves the claim its own by its token,
  /// removes it and delivers the file under its own name; the killed run's marker goes too.
  @Test func aClaimLeftByAKillIsRemovedAndTheNameUsed() async throws {
    let run = try await EndedForward("killed in the move window", endedAt: .killedBeforeMove)
    defer { run.scratch.remove() }
    let report = try await run.resume()
    #expect(try contents(of: run.folder) == ["x.txt": run.mine])
    #expect(report.files.map(\.destination) == ["x.txt"])
    #expect(report.renames.isEmpty)
    #expect(report.possibleLeftovers.isEmpty)
  }

  @Test func aHandleStillOpenOnTheUploadStopsTheResumeUntilItCloses() async throws {
    let run = try await EndedForward("held by a stalled session", endedAt: .killedBeforeMove)
    defer { run.scratch.remove() }
    let temporary = try run.temporary()
    let other = try await OtherConnection(run.destination)
    let marker = try await other.holdMarker(in: run.folder)
    let handle = try await other.open(temporary)
    do {
      _ = try await run.resume()
      Issue.record("the resume went on while a handle was open on the upload")
    } catch let failure as ForwardFailure {
      #expect(failure.kind == .earlierRequestPending)
      #expect(failure.problem.contains("127.0.0.1"), "\(failure.problem)")
      #expect(failure.problem.contains("x.txt"), "\(failure.problem)")
    }
    // Nothing sent again, nothing removed: the upload is still the only copy.
    let held = try destinationContents(of: run.folder)
    #expect(held["x.txt"] == aClaim)
    #expect(held.values.filter { $0 == run.mine }.count == 1, "\(held.keys.sorted())")
    #expect(held.count == 3, "\(held.keys.sorted())")
    await other.close(handle)
    await other.close(marker)
    await other.free()
    // The stalled connection is gone: its claim is removed and the name used.
    let report = try await run.resume()
    #expect(try contents(of: run.folder) == ["x.txt": run.mine])
    #expect(report.files.map(\.destination) == ["x.txt"])
  }

  /// An earlier resume fenced the upload aside and found a handle open on it: the next one
  /// checks it there again, by an open that shares reads only (refused beside a writer).
  @Test func anUploadAlreadyAsideIsCheckedAgainForOpenHandles() async throws {
    let run = try await EndedForward("aside, a handle still open on it", endedAt: .killedBeforeMove)
    defer { run.scratch.remove() }
    let temporary = try run.temporary()
    let aside = try #require(NameRules.aside(of: [temporary]).last)
    let other = try await OtherConnection(run.destination)
    let marker = try await other.holdMarker(in: run.folder)
    #expect(await other.rename(temporary, to: aside) == 0)
    let handle = try await other.open(aside)
    let failure = await #expect(throws: ForwardFailure.self) {
      _ = try await run.resume()
    }
    #expect(failure?.kind == .earlierRequestPending, "\(String(describing: failure))")
    #expect(
      try destinationContents(of: run.folder) == [
        "x.txt": aClaim, aside: run.mine, aMarker: Data(),
      ],
      "nothing sent again")
    await other.close(handle)
    await other.close(marker)
    await other.free()
    let report = try await run.resume()
    #expect(try contents(of: run.folder) == ["x.txt": run.mine])
    #expect(report.files.map(\.destination) == ["x.txt"])
  }

  /// The fence found the upload moved, to a name the attempt claimed, but a handle is still
  /// open on it there: a rename on that handle could still move it on, so it is not taken yet.
  @Test func aMovedUploadWithAHandleStillOpenOnItIsNotTakenYet() async throws {
    let run = try await EndedForward(
      "moved, a handle still on it", endedAt: .killedBeforeSecondMove)
    defer { run.scratch.remove() }
    let temporary = try run.temporary()
    let other = try await OtherConnection(run.destination)
    #expect(await other.rename(temporary, to: "x 2.txt") == 0)
    let handle = try await other.open("x 2.txt")
    let failure = await #expect(throws: ForwardFailure.self) {
      _ = try await run.resume()
    }
    #expect(failure?.kind == .earlierRequestPending, "\(String(describing: failure))")
    #expect(
      try destinationContents(of: run.folder) == [
        "x.txt": aClaim, "x 2.txt": run.mine, aMarker: Data(),
      ],
      "nothing sent again")
    await other.close(handle)
    await other.free()
    let report = try await run.resume()
    #expect(try destinationContents(of: run.folder) == ["x.txt": aClaim, "x 2.txt": run.mine])
    #expect(report.files.map(\.destination) == ["x 2.txt"])
    #expect(
      report.possibleLeftovers.map { "\($0.path) \($0.reason)" } == ["x.txt claimAnswerLost"])
  }

  /// The handle a stalled libsmbclient rename really holds (DELETE access, every sharing mode),
  /// from a Python smbprotocol client (`stalled_rename.py`): the rename aside goes through it,
  /// the open that shares reads only is refused, and the rename it then carries out late takes
  /// the file from its aside name to `x.txt`, where the next resume finds it, once.
  @Test func theHandleAStalledRenameHoldsIsCaughtAndItsRenameTakenOnce() async throws {
    let server = try TestSMBServer.fromEnvironment()
    let name = uniqueName("stalled")
    let run = try await EndedForward(
      "renamed late by the stalled session", endedAt: .killedBeforeMove,
      share: {
        let destination = try server.destination(
          "private", name, credentials: Credentials(username: "dropper", password: "s3cret"))
        return (destination, server.directory("private/\(name)"))
      })
    defer { run.scratch.remove() }
    let temporary = try run.temporary()
    let ready = run.scratch.root.appendingPathComponent("ready").path
    #expect(mkfifo(ready, 0o600) == 0)
    let stalled = try ChildProcess(
      FileManager.default.currentDirectoryPath + "/.venv/bin/python",
      [
        FileManager.default.currentDirectoryPath
          + "/Tests/BrowserDropForwardingTests/stalled_rename.py",
        "\(server.port)", "private", "dropper", "s3cret", name, temporary, ready,
      ], input: .pipe)
    #expect(await Self.line(from: ready) == "held")
    let failure = await #expect(throws: ForwardFailure.self) {
      _ = try await run.resume()
    }
    #expect(failure?.kind == .earlierRequestPending, "\(String(describing: failure))")
    let held = try destinationContents(of: run.folder)
    #expect(held["x.txt"] == aClaim)
    #expect(held.values.filter { $0 == run.mine }.count == 1, "\(held.keys.sorted())")
    // The late request: the claim deleted, then the rename on the old handle.
    #expect(stalled.write(Data("rename x.txt\n".utf8)))
    stalled.closeInput()
    #expect(await stalled.wait(timeout: .seconds(30)) == .exited(0), "\(stalled.errorOutput)")
    #expect(String(decoding: stalled.output, as: UTF8.self) == "renamed\n")
    let report = try await run.resume()
    #expect(try contents(of: run.folder) == ["x.txt": run.mine])
    #expect(report.files.map(\.destination) == ["x.txt"])
    #expect(report.possibleLeftovers.isEmpty)
  }

  /// The first line written to the FIFO at `path`, or nil after 30 s: read on a thread of its
  /// own (the open and the read block).
  private static func line(from path: String) async -> String? {
    await withCheckedContinuation { continuation in
      DispatchQueue.global().async {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return continuation.resume(returning: nil) }
        defer { close(fd) }
        var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        var text = ""
        while !text.hasSuffix("\n"), poll(&ready, 1, 30_000) > 0 {
          var byte: UInt8 = 0
          let count = read(fd, &byte, 1)
          if count == 0 { break }
          if count == 1 { text.append(Character(UnicodeScalar(byte))) }
        }
        continuation.resume(returning: text.hasSuffix("\n") ? String(text.dropLast()) : nil)
      }
    }
  }

  /// A reader of the delivered file (a preview, a virus scanner) does not hold the resume up:
  /// only a handle that could write, delete or rename it does.
  @Test func aReaderOfTheMovedFileDoesNotHoldTheResumeUp() async throws {
    let run = try await EndedForward(
      "moved, its answer lost, being read", endedAt: .moveAnswerLostAfterMove,
      with: ForwardFailure.self)
    defer { run.scratch.remove() }
    #expect(try contents(of: run.folder) == ["x.txt": run.mine])
    let other = try await OtherConnection(run.destination)
    let reader = try await other.open("x.txt", flags: O_RDONLY)
    let report = try await run.resume()
    await other.close(reader)
    await other.free()
    #expect(report.files.map(\.destination) == ["x.txt"])
    #expect(report.resumedFiles == 1)
    #expect(try contents(of: run.folder) == ["x.txt": run.mine])
  }

  @Test func aLateRenameOntoAnEarlierNameOfTheAttemptIsTakenThere() async throws {
    let run = try await EndedForward(
      "moved late onto the first name", endedAt: .killedBeforeSecondMove)
    defer { run.scratch.remove() }
    let temporary = try run.temporary()
    #expect(
      try destinationContents(of: run.folder)
        == ["x.txt": aClaim, "x 2.txt": aClaim, temporary: run.mine, aMarker: Data()])
    // libsmbclient's second rename for the first name, carried out after the attempt had moved
    // on to the next name.
    let other = try await OtherConnection(run.destination)
    #expect(await other.rename(temporary, to: "x.txt") == 0)
    await other.free()
    let report = try await run.resume()
    // Looking only at the latest name, the resume would send it again (x 3.txt): a duplicate.
    #expect(try destinationContents(of: run.folder) == ["x.txt": run.mine, "x 2.txt": aClaim])
    #expect(report.files.map(\.destination) == ["x.txt"])
    #expect(
      report.possibleLeftovers.map { "\($0.path) \($0.reason)" } == ["x 2.txt claimAnswerLost"])
  }
}

import BrowserDropTestSupport
import Foundation
import Glibc
import Testing

@testable import BrowserDropForwarding

/// Issue 16, case 1: a delivery killed right after its manifest records `installing` for a name
/// that an earlier delivery already holds. The resume must neither take the earlier file for
/// its own nor remove it: the destination ends with both, the new one under the next number.
@Suite("Crash between the installing record and the name check")
struct CrashResumeTests {
  enum Place: CaseIterable { case local, smb }

  @Test(
    "The earlier file survives and the new one arrives as “x 2.txt”",
    arguments: Place.allCases, [Data(), Data("batch two".utf8)])
  func earlierFileSurvives(place: Place, second: Data) async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let (destination, folder) = try Self.destination(place, scratch)
    let first = try scratch.folder("batch1", ["x.txt": Data()])
    _ = try await Forwarder().forward(folder: first, to: destination)
    let earlier = try Self.identity(folder.appendingPathComponent("x.txt"))

    let batch = try scratch.folder("batch2", ["x.txt": second])
    var crashing = Forwarder()
    crashing.crashPoint = .installingRecorded
    await #expect(throws: SimulatedCrash.self) {
      _ = try await crashing.forward(folder: batch, to: destination)
    }
    let report = try await Forwarder().forward(folder: batch, to: destination, verify: .sha256)

    let found = try contents(of: folder)
    #expect(found == ["x.txt": Data(), "x 2.txt": second], "\(found.keys.sorted())")
    #expect(try Self.identity(folder.appendingPathComponent("x.txt")) == earlier)
    #expect(report.files.map(\.destination) == ["x 2.txt"])
  }

  /// Where a kill ends a delivery after the final name is taken and before the manifest says
  /// so: right after the server's exclusive create of the SMB claim, or right after the file
  /// itself reached its final name (SMB rename, local `renameat2`).
  enum Window: String, CaseIterable, CustomTestStringConvertible {
    case smbClaimCreated, smbInstalled, localInstalled

    var place: Place { self == .localInstalled ? .local : .smb }
    var point: Checkpoint { self == .smbClaimCreated ? .claimCreated : .installed }
    var testDescription: String { rawValue }
  }

  /// Issue 16's remaining window: killed after the name is taken, before it is recorded. After
  /// the resume every file is there once, with its own bytes, and nothing else is: no empty
  /// claim, no file under a second number, no temporary file.
  @Test(
    "Killed between taking the final name and recording it: each file once, nothing else",
    arguments: Window.allCases, [Data(), Data("batch two".utf8)])
  func killedAfterTheNameIsTaken(window: Window, content: Data) async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let (destination, folder) = try Self.destination(window.place, scratch)
    let files = ["x.txt": content, "y.txt": Data("why".utf8)]
    let batch = try scratch.folder("batch", files)
    var crashing = Forwarder()
    crashing.crashPoint = window.point
    await #expect(throws: SimulatedCrash.self) {
      _ = try await crashing.forward(folder: batch, to: destination)
    }
    if window == .smbClaimCreated {
      // The claim child recorded the create by itself (loading waits for its lock).
      _ = try await Manifest.load(folder: batch.path, destination: "")
      let records = try String(
        contentsOf: batch.appendingPathComponent(Manifest.fileName), encoding: .utf8)
      #expect(records.contains(#""state":"claimed""#), "\(records)")
    }
    let report = try await Forwarder().forward(folder: batch, to: destination, verify: .sha256)

    let found = try contents(of: folder)
    #expect(found == files, "\(found.keys.sorted())")
    #expect(report.files.map(\.destination).sorted() == ["x.txt", "y.txt"])
    #expect(!FileManager.default.fileExists(atPath: batch.path), "the source is removed")
  }

  /// The connection lost right after a claim was created and recorded (the test's own smbd
  /// stopped there): the delivery fails; after the server is back, the resume removes the
  /// empty claim its record proves is its own and delivers each file once, nothing else.
  @Test("smbd stopped right after the claim: after the restart, each file once, nothing else")
  func serverStoppedAfterTheClaim() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let own = try await TestSMBServer.own(in: scratch)
    let (base, port) = (own.base, own.port)
    let destination = try own.destination(
      "guest", "lost", options: SMBOptions(timeout: .seconds(3)))
    let files = ["x.txt": Data("lost answer".utf8), "y.txt": Data()]
    let batch = try scratch.folder("batch", files)
    var stopping = Forwarder()
    let stopped = Stopped()
    stopping.afterClaim = {
      guard await stopped.claim() else { return }
      do { try await LoopbackSMB.run("down", base: base, port: port) } catch { Issue.record(error) }
    }
    await #expect(throws: ForwardFailure.self) {
      _ = try await stopping.forward(folder: batch, to: destination)
    }
    try await LoopbackSMB.run("up", base: base, port: port)
    let report = try await Forwarder().forward(folder: batch, to: destination, verify: .sha256)
    let found = try contents(of: own.directory("guest").appendingPathComponent("lost"))
    try await LoopbackSMB.run("down", base: base, port: port)
    #expect(found == files, "\(found.keys.sorted())")
    #expect(report.files.map(\.destination).sorted() == ["x.txt", "y.txt"])
  }

  /// The destination and the folder on this disk that it writes into.
  static func destination(
    _ place: Place, _ scratch: Scratch
  ) throws -> (
    any Destination, URL
  ) {
    switch place {
    case .local:
      let folder = scratch.root.appendingPathComponent("inbox")
      return (LocalDestination(directory: folder), folder)
    case .smb:
      let server = try TestSMBServer.fromEnvironment()
      let name = uniqueName("crash")
      return (try server.destination("guest", name), server.directory("guest/\(name)"))
    }
  }

  /// The inode and size of a file, to tell an untouched file from a replaced one.
  static func identity(_ url: URL) throws -> [Int] {
    var info = stat()
    guard lstat(url.path, &info) == 0 else { throw POSIXError(.ENOENT) }
    return [Int(info.st_ino), Int(info.st_size)]
  }
}

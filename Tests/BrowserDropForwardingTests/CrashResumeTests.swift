import BrowserDropTestSupport
import Foundation
import Glibc
import Testing

@testable import BrowserDropForwarding

/// Issue 16, case 1: a delivery killed right after its manifest records `installing` for a name
/// that an earlier delivery already holds. The resume must neither take the earlier file for
/// its own nor remove it: the destination ends with both, the new one under the next number.
/// On SMB the earlier (empty) file is reported as a possible leftover of the killed claim: no
/// record tells it from one.
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
    await #expect(throws: SimulatedCrash.self) {
      _ = try await Forwarder.stopping(at: .installingRecorded).forward(
        folder: batch, to: destination)
    }
    let report = try await Forwarder().forward(folder: batch, to: destination, verify: .sha256)

    let found = try contents(of: folder)
    #expect(found == ["x.txt": Data(), "x 2.txt": second], "\(found.keys.sorted())")
    #expect(try Self.identity(folder.appendingPathComponent("x.txt")) == earlier)
    #expect(report.files.map(\.destination) == ["x 2.txt"])
    #expect(
      report.possibleLeftovers
        == (place == .smb ? [.init(source: "x.txt", path: "x.txt", reason: .claimNotRecorded)] : [])
    )
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
    await #expect(throws: SimulatedCrash.self) {
      _ = try await Forwarder.stopping(at: window.point).forward(folder: batch, to: destination)
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
    #expect(report.possibleLeftovers.isEmpty, "every claim was recorded")
    #expect(!FileManager.default.fileExists(atPath: batch.path), "the source is removed")
  }

  /// The residual window, case 3 (no claim child): killed in the process between the server's
  /// create and the `claimed` record. The empty claim can't be told from another writer's file,
  /// so it stays, the file arrives under the next number, and the report names the empty one.
  @Test("Killed between an in-process claim and its record: the empty claim is reported")
  func killedBetweenAnInProcessClaimAndItsRecord() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let (destination, folder) = try Self.destination(.smb, scratch)
    let batch = try scratch.folder("batch", ["x.txt": Data("ex".utf8)])
    var crashing = Forwarder()
    crashing.claimTrial = .inProcess
    crashing.crashPoint = .claimCreated
    await #expect(throws: SimulatedCrash.self) {
      _ = try await crashing.forward(folder: batch, to: destination)
    }
    let report = try await Forwarder().forward(folder: batch, to: destination, verify: .sha256)

    let found = try contents(of: folder)
    #expect(found == ["x.txt": Data(), "x 2.txt": Data("ex".utf8)], "\(found.keys.sorted())")
    #expect(report.files.map(\.destination) == ["x 2.txt"])
    #expect(
      report.possibleLeftovers == [.init(source: "x.txt", path: "x.txt", reason: .claimNotRecorded)]
    )
  }

  /// The residual window, case 1: a claim whose answer never comes back while the server
  /// carries out its create. The test's own smbd is stopped (`SIGSTOP` to its process group)
  /// right before the third claim is sent; once the create waits unread in the server's socket,
  /// the claim child is killed (as a kill of it, or its alarm, would end it) and the server
  /// continued, so the create is carried out with nobody to answer. The resume leaves the
  /// empty file there, delivers the file under the next number, and reports the empty one as a
  /// claim whose answer was lost.
  ///
  /// The third, not the second, and a 30 s request timeout: libsmbclient checks a cached
  /// connection with an echo before a request when it has never echoed on it, or not for
  /// longer than the request timeout (`SMBC_check_server`), and a stopped server would then
  /// hold that echo instead of the create. The second claim makes the echo; the third follows
  /// well within the timeout, even with every other suite on the SMB lane.
  @Test("smbd hung during a claim whose child dies: the late create is reported, never removed")
  func serverHungDuringAClaim() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let own = try await TestSMBServer.own(in: scratch)
    let (base, port) = (own.base, own.port)
    let group = try Self.processGroup(of: own)
    defer { kill(-group, SIGCONT) }  // Never leave it stopped, whatever fails.
    let destination = try own.destination(
      "guest", "hung", options: SMBOptions(timeout: .seconds(30)))
    let files = [
      "x.txt": Data("first".utf8), "y.txt": Data("second".utf8), "z.txt": Data("3".utf8),
    ]
    let batch = try scratch.folder("batch", files)
    try #require(
      FileManager.default.isExecutableFile(atPath: "/usr/bin/ss"),
      "this test needs ss(8) at /usr/bin/ss (iproute2) to see the request waiting in smbd")
    var hanging = Forwarder()
    let (claims, seen) = (Counter(), Counter())
    let killer = TaskHolder()
    hanging.beforeClaim = {
      guard await claims.next() == 3 else { return }
      kill(-group, SIGSTOP)
      // Held, and awaited before the test returns: it must never outlive the test (its port,
      // and so its processes, may be another test's by then).
      await killer.hold {
        for _ in 0..<1000 where !Task.isCancelled {
          if await Self.requestWaiting(at: port) { break }
          _ = await seen.next()
          try? await Task.sleep(for: .milliseconds(5))
        }
        // Only this delivery's claim child: the one connected to this test's smbd (others
        // belong to tests running beside this one).
        let child = await Self.claimChild(connectedTo: port)
        let looks = await seen.next()
        print("hung smbd: looked \(looks) times for the waiting create; claim child \(child ?? 0)")
        if let child, child > 0 {  // Never 0: this process group.
          kill(child, SIGKILL)
          for _ in 0..<2000 where ClaimTests.isRunning(String(child)) {
            try? await Task.sleep(for: .milliseconds(1))
          }
        }
        kill(-group, SIGCONT)
      }
    }
    await #expect(throws: ForwardFailure.self) {
      _ = try await hanging.forward(folder: batch, to: destination)
    }
    await killer.finish()
    kill(-group, SIGCONT)
    let share = own.directory("guest").appendingPathComponent("hung")
    // The create queued in the stopped server runs once it continues.
    for _ in 0..<2000 where !FileManager.default.fileExists(atPath: share.path + "/z.txt") {
      try await Task.sleep(for: .milliseconds(10))
    }
    let records = try String(
      contentsOf: batch.appendingPathComponent(Manifest.fileName), encoding: .utf8)
    let late = try contents(of: share)
    let report = try await Forwarder().forward(folder: batch, to: destination, verify: .sha256)
    let found = try contents(of: share)
    try await LoopbackSMB.run("down", base: base, port: port)
    var expected = files
    expected["z.txt"] = Data()
    expected["z 2.txt"] = files["z.txt"]
    #expect(found == expected, "\(found.keys.sorted())")
    #expect(report.files.map(\.destination) == ["x.txt", "y.txt", "z 2.txt"])
    #expect(
      report.possibleLeftovers == [.init(source: "z.txt", path: "z.txt", reason: .claimAnswerLost)],
      "before the resume: \(late.keys.sorted()); records: \(records)")
  }

  /// The `bd-smb-claim` process with a connection to 127.0.0.1:`port`, as ss(8) shows it.
  static func claimChild(connectedTo port: Int) async -> pid_t? {
    guard
      let run = try? await ChildProcess.capture(
        "/usr/bin/ss", ["-tnpH", "state", "established", "( dport = :\(port) )"],
        timeout: .seconds(10))
    else { return nil }
    // … users:(("bd-smb-claim",pid=1234,fd=4))
    for line in run.output.split(separator: "\n") where line.contains("\"bd-smb-claim\",pid=") {
      let digits = line.split(separator: "\"bd-smb-claim\",pid=")[1].prefix { $0.isNumber }
      return pid_t(digits)
    }
    return nil
  }

  /// Whether a connection to the server listening on 127.0.0.1:`port` holds bytes the server
  /// has not read, such as a request waiting in a stopped smbd: the `Recv-Q` of the server's
  /// end, as ss(8) reads it over netlink (/proc/net/tcp lists every socket of the machine,
  /// megabytes of them on a busy test host).
  static func requestWaiting(at port: Int) async -> Bool {
    guard
      let run = try? await ChildProcess.capture(
        "/usr/bin/ss", ["-tnH", "state", "established", "( sport = :\(port) )"],
        timeout: .seconds(10))
    else { return false }
    return run.output.split(separator: "\n").contains { line in
      // Recv-Q, Send-Q, local address, peer address.
      line.split(separator: " ").first.flatMap { Int($0) }.map { $0 > 0 } ?? false
    }
  }

  /// The process group of a server of the test's own: its smbd leads one (it is never started
  /// with `--no-process-group`), which the test can stop and continue as a whole.
  static func processGroup(of server: TestSMBServer) throws -> pid_t {
    let text = try String(
      contentsOf: server.base.appendingPathComponent("smbd.harness.pid"), encoding: .utf8)
    let pid = try #require(pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)))
    // Never a group this process is in: stopping it would stop the test.
    try #require(getpgid(pid) == pid && getpgid(0) != pid)
    return pid
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
    #expect(report.possibleLeftovers.isEmpty, "the record proves the claim its own")
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

/// Holds one unstructured task of a test so the test can wait for it before it returns.
actor TaskHolder {
  private var task: Task<Void, Never>?

  /// Starts `body` as the held task.
  func hold(_ body: @escaping @Sendable () async -> Void) {
    task = Task { await body() }
  }

  /// Waits for the held task to end.
  func finish() async {
    await task?.value
    task = nil
  }
}

/// Counts calls, from 1.
actor Counter {
  private var count = 0

  func next() -> Int {
    count += 1
    return count
  }
}

import BrowserDropTestSupport
import Foundation
import Glibc
import Testing

@testable import BrowserDropForwarding

/// SMB claims (issue 16): the exclusive create of a final name and its `claimed` record, made
/// by a claim child of the SMB thread, or in this process when no child can be waited for.
@Suite("Claims of final names on SMB", .serialized)
struct ClaimTests {
  /// Many small files, each needing a claim, once through claim children and once in this
  /// process (the way taken when no child can be waited for, e.g. SIGCHLD ignored):
  /// every file arrives once with its own bytes, both ways, and nothing else is there. Prints
  /// the time per file of each, and the CPU time of this process (with its reaped children)
  /// and of the smbd (with its per-connection children). Run it alone for the figures: this
  /// process's CPU counts every test running beside it.
  @Test func childAndInProcessClaimsDeliverOnce() async throws {
    let server = try TestSMBServer.fromEnvironment()
    let scratch = try Scratch()
    defer { scratch.remove() }
    let count =
      ProcessInfo.processInfo.environment["BROWSERDROP_CLAIM_FILES"].flatMap { Int($0) } ?? 40
    var files: [String: Data] = [:]
    for index in 0..<count { files["f\(index).txt"] = Data("file \(index)".utf8) }
    let smbd = try String(
      contentsOf: server.base.appendingPathComponent("smbd.harness.pid"), encoding: .utf8
    ).trimmingCharacters(in: .whitespacesAndNewlines)
    for inProcess in [false, true] {
      let name = uniqueName("claims")
      let source = try scratch.folder(name, files)
      let destination = try server.destination("guest", name)
      var forwarder = Forwarder()
      forwarder.claimTrial = inProcess ? .inProcess : nil
      let (ours, theirs, started) = (try Self.cpuOfThisProcess(), try Self.cpu(of: smbd), Date())
      let report = try await forwarder.forward(folder: source, to: destination)
      let wall = Date().timeIntervalSince(started)
      let (oursAfter, theirsAfter) = (try Self.cpuOfThisProcess(), try Self.cpu(of: smbd))
      #expect(report.files.count == count)
      #expect(try contents(of: server.directory("guest/\(name)")) == files)
      func perFile(_ seconds: Double) -> String {
        String(format: "%.2f ms", seconds * 1000 / Double(count))
      }
      print(
        "claims \(inProcess ? "in process" : "by children"): \(count) files, per file: "
          + "wall \(perFile(wall)), CPU here \(perFile(oursAfter - ours)), "
          + "CPU smbd \(perFile(theirsAfter - theirs))")
    }
  }

  /// One claim child serves the whole delivery: the same `bd-smb-claim` child of this process
  /// is there right after every claim (a child per claim would have been reaped after each),
  /// and it is gone (ended and reaped) once the delivery returns.
  @Test func oneChildServesTheWholeDelivery() async throws {
    let seen = try await Self.deliver(20, named: "one-child") { seen in
      let children = Self.claimChildren()
      await seen.note(children, memory: children.first.map { Self.memory(of: $0) } ?? "")
    }
    let (claims, throughout, memory) = await seen.summary()
    print("claim child after the last claim: \(memory)")
    #expect(claims == 20)
    #expect(!throughout.isEmpty, "no claim child lived through every claim")
    for pid in throughout { #expect(!Self.isClaimChild(pid), "claim child \(pid) still runs") }
  }

  /// A claim child that dies between two claims (here `SIGKILL`ed right after the first claim
  /// and its record) is replaced at the next claim: every file still arrives once with its own
  /// bytes, nothing else is there, and the later claims went through another child.
  @Test func aDeadChildIsReplaced() async throws {
    let seen = try await Self.deliver(6, named: "replaced") { seen in
      let children = Self.claimChildren()
      let first = await seen.note(children, memory: "")
      guard first, let child = children.first, let pid = Int32(child) else { return }
      kill(pid, SIGKILL)
      // Bounded: a SIGKILLed child is gone at once (a zombie until it is reaped).
      for _ in 0..<2000 where Self.isRunning(child) { try? await Task.sleep(for: .milliseconds(1)) }
    }
    let (claims, throughout, _) = await seen.summary()
    #expect(claims == 6)
    #expect(throughout.isEmpty, "the killed child can't have seen the later claims")
    #expect(await seen.distinct() >= 2)
  }

  /// The claim child appends its record after a line cut short (here a part of a record
  /// written right before the claim, as a crash of an earlier writer leaves it): the record
  /// starts on a line of its own, so the resume reads it and removes the claim it proves its own.
  @Test func aClaimRecordAfterALineCutShortIsRead() async throws {
    let server = try TestSMBServer.fromEnvironment()
    let scratch = try Scratch()
    defer { scratch.remove() }
    let name = uniqueName("cut")
    let files = ["x.txt": Data("cut short".utf8)]
    let source = try scratch.folder(name, files)
    let destination = try server.destination("guest", name)
    let manifest = source.appendingPathComponent(Manifest.fileName)
    var crashing = Forwarder()
    crashing.crashPoint = .claimCreated
    crashing.beforeClaim = {
      let cut = Array(#"{"destination":"smb://elsewhere","source":"#.utf8)
      let file = open(manifest.path, O_WRONLY | O_APPEND | O_CLOEXEC)
      guard file >= 0 else {
        Issue.record("no manifest: errno \(errno)")
        return
      }
      #expect(write(file, cut, cut.count) == cut.count)
      close(file)
    }
    await #expect(throws: SimulatedCrash.self) {
      _ = try await crashing.forward(folder: source, to: destination)
    }
    // The claim child records the claim a moment after the "kill": up to 10 s for it.
    var loaded = try await Manifest.load(folder: source.path, destination: destination.description)
    for _ in 0..<500 where loaded.attempts["x.txt"]?.claimed != true {
      try await Task.sleep(for: .milliseconds(20))
      loaded = try await Manifest.load(folder: source.path, destination: destination.description)
    }
    #expect(loaded.attempts["x.txt"]?.claimed == true, "the child's record was not read")
    let records = try String(contentsOf: manifest, encoding: .utf8)
    #expect(records.contains(#""source":"# + "\n" + #"{"#), "\(records)")

    let report = try await Forwarder().forward(folder: source, to: destination)
    #expect(try contents(of: server.directory("guest/\(name)")) == files)
    #expect(report.possibleLeftovers.isEmpty)
  }

  /// A claim recorded by the claim child alone (the delivery killed right after the create) is
  /// the attempt's own whatever became of the source since: a resume after the file changed
  /// size removes it and delivers the new bytes under the first name, reporting nothing.
  @Test func aClaimIsSettledWhenTheSourceChangedSize() async throws {
    let server = try TestSMBServer.fromEnvironment()
    let scratch = try Scratch()
    defer { scratch.remove() }
    let name = uniqueName("resized")
    let source = try scratch.folder(name, ["x.txt": Data("before".utf8)])
    let destination = try server.destination("guest", name)
    var crashing = Forwarder()
    crashing.crashPoint = .claimCreated
    await #expect(throws: SimulatedCrash.self) {
      _ = try await crashing.forward(folder: source, to: destination)
    }
    let shared = server.directory("guest/\(name)")
    // The claim child goes on after the "kill" (as after a real one): it records the claim and
    // writes its token a moment later. Up to 10 s for it.
    var crashed = try destinationContents(of: shared)
    for _ in 0..<500 where crashed["x.txt"] != aClaim {
      try await Task.sleep(for: .milliseconds(20))
      crashed = try destinationContents(of: shared)
    }
    #expect(crashed["x.txt"] == aClaim, "no claim: \(crashed)")

    let after = ["x.txt": Data("after, and longer".utf8)]
    try after["x.txt"]!.write(to: source.appendingPathComponent("x.txt"))
    let report = try await Forwarder().forward(folder: source, to: destination)
    #expect(try contents(of: shared) == after)
    #expect(report.possibleLeftovers.isEmpty, "\(report.possibleLeftovers)")
    #expect(report.renames.isEmpty, "\(report.renames)")
  }

  /// Forwards `count` small files to a new folder of the smbd, running `afterClaim` after each
  /// claim, and checks that each arrived once with its own bytes and nothing else is there.
  private static func deliver(
    _ count: Int, named prefix: String,
    afterClaim: @escaping @Sendable (ClaimChildren) async -> Void
  ) async throws -> ClaimChildren {
    let server = try TestSMBServer.fromEnvironment()
    let scratch = try Scratch()
    defer { scratch.remove() }
    var files: [String: Data] = [:]
    for index in 0..<count { files["\(prefix)-\(index).txt"] = Data("claim \(index)".utf8) }
    let name = uniqueName(prefix)
    let source = try scratch.folder(name, files)
    let seen = ClaimChildren()
    var forwarder = Forwarder()
    forwarder.afterClaim = { await afterClaim(seen) }
    let report = try await forwarder.forward(
      folder: source, to: try server.destination("guest", name))
    #expect(report.files.count == count)
    #expect(try contents(of: server.directory("guest/\(name)")) == files)
    return seen
  }

  /// Whether process `pid` runs (not a zombie).
  static func isRunning(_ pid: String) -> Bool {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
      let end = stat.range(of: ")", options: .backwards)
    else { return false }
    return !stat[end.upperBound...].hasPrefix(" Z")
  }

  /// The `bd-smb-claim` children of this process right now.
  static func claimChildren() -> Set<String> {
    var found: Set<String> = []
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    for task in tasks {
      let list =
        (try? String(contentsOfFile: "/proc/self/task/\(task)/children", encoding: .utf8)) ?? ""
      for child in list.split(separator: " ") where isClaimChild(String(child)) {
        found.insert(String(child))
      }
    }
    return found
  }

  /// Process `pid`'s resident and private memory (/proc/PID/smaps_rollup), as one line.
  static func memory(of pid: String) -> String {
    let rollup = (try? String(contentsOfFile: "/proc/\(pid)/smaps_rollup", encoding: .utf8)) ?? ""
    return rollup.split(separator: "\n").filter {
      $0.hasPrefix("Rss:") || $0.hasPrefix("Pss:") || $0.hasPrefix("Private_")
    }.map { $0.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ") }
      .joined(separator: ", ")
  }

  /// Whether process `pid` exists and is a claim child.
  static func isClaimChild(_ pid: String) -> Bool {
    ((try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)) ?? "")
      .hasPrefix("bd-smb-claim")
  }

  /// User and system CPU seconds of this process and its reaped children.
  static func cpuOfThisProcess() throws -> Double {
    var own = rusage()
    var children = rusage()
    getrusage(RUSAGE_SELF.rawValue, &own)
    getrusage(RUSAGE_CHILDREN.rawValue, &children)
    func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
    return seconds(own.ru_utime) + seconds(own.ru_stime) + seconds(children.ru_utime)
      + seconds(children.ru_stime)
  }

  /// User and system CPU seconds of process `pid`, its reaped children and its live ones (an
  /// smbd serves each connection in a child of its own): /proc/PID/stat, fields 14-17.
  static func cpu(of pid: String) throws -> Double {
    func ticks(_ pid: Substring, fields: ClosedRange<Int>) -> Double {
      guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let end = stat.range(of: ")", options: .backwards)
      else { return 0 }
      // After the command name: state is field 3, so field N is at index N - 3.
      let values = stat[end.upperBound...].split(separator: " ")
      return values[(fields.lowerBound - 3)...(fields.upperBound - 3)].compactMap { Double($0) }
        .reduce(0, +)
    }
    var total = ticks(Substring(pid), fields: 14...17)
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
    for task in tasks {
      let children =
        (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/children", encoding: .utf8)) ?? ""
      for child in children.split(separator: " ") { total += ticks(child, fields: 14...15) }
    }
    return total / Double(sysconf(Int32(_SC_CLK_TCK)))
  }
}

/// The claim children seen right after each claim of one delivery.
private actor ClaimChildren {
  private var claims = 0
  private var common: Set<String>?
  private var memory = ""
  private var all: Set<String> = []

  /// Notes the children seen after one claim; true for the first claim.
  @discardableResult
  func note(_ children: Set<String>, memory: String) -> Bool {
    claims += 1
    common = common.map { $0.intersection(children) } ?? children
    all.formUnion(children)
    self.memory = memory
    return claims == 1
  }

  /// How many different children were seen.
  func distinct() -> Int { all.count }

  /// How many claims there were, the children present at every one of them, and the memory
  /// of one of them at the last claim.
  func summary() -> (Int, Set<String>, String) { (claims, common ?? [], memory) }
}

import BrowserDrop
import BrowserDropTestSupport
import Foundation
import Glibc
import Testing

/// Several kiosks (separate `browserdrop --kiosk` processes, each with its own staging root)
/// forwarding into one folder with the same `--batch-folder`, round after round, each round
/// giving every kiosk files with the same names and sizes but contents of its own. Some rounds
/// `kill -9` a kiosk in the middle of forwarding and restart it; on SMB some stop the server
/// under the deliveries and start it again. Used by `FleetTests` and, scaled up, by
/// `Benchmarks/custody-soak.sh`.
struct Fleet {
  enum Place: String, CaseIterable, Sendable {
    case local, smb
  }

  struct Plan: Sendable {
    var place: Place
    var kiosks: Int
    var rounds: Int
    /// Rounds in which one kiosk is killed with SIGKILL during its delivery, then restarted.
    var kills: Int
    /// Rounds in which smbd is stopped during the deliveries and started again (SMB only).
    var outages: Int
    /// Size of each round's `big.bin`.
    var bigSize: Int
    var seed: Int

    /// The round numbers that kill, spread over the run (seeded).
    func killRounds() -> Set<Int> { spread(kills, salt: 1, excluding: []) }

    /// The round numbers that stop smbd, spread over the run and never a kill round.
    func outageRounds() -> Set<Int> {
      place == .smb ? spread(outages, salt: 2, excluding: killRounds()) : []
    }

    private func spread(_ count: Int, salt: Int, excluding: Set<Int>) -> Set<Int> {
      var random = CrashTrialTests.Seeded(seed * 31 + salt)
      var chosen = Set<Int>()
      let wanted = min(count, rounds - excluding.count)
      for _ in 0..<10_000 where chosen.count < wanted {
        let round = Int.random(in: 0..<rounds, using: &random)
        if !excluding.contains(round) { chosen.insert(round) }
      }
      return chosen
    }
  }

  /// What the destination holds against what the kiosks answered 201 for.
  struct Counts: Sendable, CustomStringConvertible {
    var uploaded = 0
    var delivered = 0
    /// Uploads whose content is at the destination fewer times than it was uploaded.
    var lost = 0
    /// Copies beyond the number of uploads of that content.
    var duplicated = 0
    /// Files whose content was never uploaded (mixed or cut-short bytes).
    var extra = 0
    /// Hidden files (temporary files, claims) left at the destination.
    var leftover = 0
    var kills = 0
    var outages = 0
    /// Uploads a kiosk started, then cut when its batch closed and the grace for uploads in
    /// flight ran out (a loaded machine), which the fleet sent again, once: what the page does.
    var cutByGrace = 0
    /// Claims left at names a kiosk reported (`possibleLeftovers`): empty, or holding their
    /// attempt's line.
    var reported = 0

    var description: String {
      "uploaded \(uploaded), delivered \(delivered): lost \(lost), duplicated \(duplicated), "
        + "extra \(extra), leftover \(leftover) (kill -9: \(kills), smbd outages: \(outages)"
        + (cutByGrace > 0 ? ", cut by the batch switch's grace and sent again: \(cutByGrace)" : "")
        + ", claims left and reported: \(reported))"
    }

    var clean: Bool { lost == 0 && duplicated == 0 && extra == 0 && leftover == 0 }
  }

  let plan: Plan
  let folder: TemporaryFolder
  private let smbPort: Int
  private var processes: [CommandProcess] = []
  /// Every kiosk process started, killed ones too: their output is printed when a run fails.
  private var everyProcess: [(kiosk: Int, process: CommandProcess)] = []
  private var ports: [Int] = []

  init(_ plan: Plan) throws {
    self.plan = plan
    folder = try TemporaryFolder()
    smbPort = plan.place == .smb ? try FreePort.closed() : 0
  }

  /// The folder the kiosks' batch folder lands in, on this disk.
  var intake: URL {
    switch plan.place {
    case .local: folder.path("dest/intake")
    case .smb: folder.path("smbd/shares/guest/fleet/intake")
    }
  }

  private var destination: String {
    switch plan.place {
    case .local: folder.path("dest").path
    case .smb: "smb://127.0.0.1:\(smbPort)/guest/fleet"
    }
  }

  private mutating func start(_ kiosk: Int) throws -> CommandProcess {
    let process = try CommandProcess([
      "--kiosk", "--json", "--port", "0", "--bind", "127.0.0.1", "--quiet-period", "0.3",
      "--staging", folder.path("staging\(kiosk)").path, "--to", destination,
      "--batch-folder", "intake",
    ])
    everyProcess.append((kiosk, process))
    return process
  }

  /// Runs the plan and returns the counts; the kiosks (and the smbd) are stopped at the end.
  mutating func run() async throws -> Counts {
    if plan.place == .smb {
      try FileManager.default.createDirectory(
        at: folder.path("smbd"), withIntermediateDirectories: true)
      try await LoopbackSMB.run("up", base: folder.path("smbd"), port: smbPort)
    }
    do {
      let counts = try await runRounds()
      if plan.place == .smb {
        try await LoopbackSMB.run("down", base: folder.path("smbd"), port: smbPort)
      }
      return counts
    } catch {
      for process in processes { await process.stop() }
      if plan.place == .smb {
        try? await LoopbackSMB.run("down", base: folder.path("smbd"), port: smbPort)
      }
      throw error
    }
  }

  private mutating func runRounds() async throws -> Counts {
    var random = CrashTrialTests.Seeded(plan.seed)
    var counts = Counts()
    var uploaded: [String: Int] = [:]
    var uploadedFrom: [String: [String]] = [:]
    for kiosk in 0..<plan.kiosks {
      let process = try start(kiosk)
      processes.append(process)
      ports.append(try await process.listeningPort())
    }
    let killRounds = plan.killRounds()
    let outageRounds = plan.outageRounds()
    for round in 0..<plan.rounds {
      let marks = processes.map { $0.events.count }
      // Same names, same sizes, different contents; an empty file too, whose copies are alike.
      var uploads: [(Int, String, UploadInFlight, URL)] = []
      for kiosk in 0..<plan.kiosks {
        let seed = UInt8(truncatingIfNeeded: plan.seed &* 7 &+ round &* 13 &+ kiosk &+ 1)
        for (name, size) in zip(Self.fileNames, [plan.bigSize, 1000, 0]) {
          let source = try folder.makeFile(
            "src/\(round)-\(kiosk)-\(name)", size: size, seed: seed &+ UInt8(size % 251))
          uploads.append(
            (kiosk, name, try Uploader.start(source, as: name, port: ports[kiosk]), source))
        }
      }
      var sources: [URL] = []
      for (kiosk, name, upload, source) in uploads {
        // A batch switch hands the listener over, so a request that meets it is served by the
        // next session (it used to be dropped unserved); only an upload the closing session had
        // started and cut when the switch's grace ran out is sent again, as the page would.
        var status = try await Uploader.status(of: upload)
        if status == 0, try await Self.cutByGrace(name, by: processes[kiosk], after: marks[kiosk]) {
          print("fleet \(plan.place): round \(round), kiosk \(kiosk)'s \(name) cut by a switch")
          counts.cutByGrace += 1
          status = try await Uploader.upload(source, as: name, port: ports[kiosk])
        }
        #expect(status == 201, "round \(round), kiosk \(kiosk): \(name)")
        if status == 201 { sources.append(source) }
      }
      for (digest, source) in zip(try await CrashTrialTests.sha256(sources), sources) {
        uploaded[digest, default: 0] += 1
        uploadedFrom[digest, default: []].append(source.lastPathComponent)
      }
      counts.uploaded += sources.count

      var restarted = Set<Int>()
      if killRounds.contains(round) {
        let victim = round % plan.kiosks
        restarted.insert(victim)
        try await processes[victim].waitForEvent(
          "forwardStarted", after: marks[victim], timeout: 60)
        try await Task.sleep(for: .milliseconds(Int.random(in: 0...400, using: &random)))
        try await CrashTrialTests.sigkill(processes[victim])
        processes[victim] = try start(victim)
        ports[victim] = try await processes[victim].listeningPort()
        counts.kills += 1
      } else if outageRounds.contains(round) {
        try await processes[0].waitForEvent("forwardStarted", after: marks[0], timeout: 60)
        try await Task.sleep(for: .milliseconds(Int.random(in: 0...300, using: &random)))
        try await LoopbackSMB.run("down", base: folder.path("smbd"), port: smbPort)
        try await Task.sleep(for: .milliseconds(500))
        try await LoopbackSMB.run("up", base: folder.path("smbd"), port: smbPort)
        counts.outages += 1
      }
      try await drain(round: round, after: marks, restarted: restarted)
    }
    for process in processes {
      process.send(SIGTERM)
      #expect(try await process.waitForExit(timeout: 60) == 0)
    }
    processes = []

    let everything = CrashTrialTests.allFiles(in: intake)
    let hidden = everything.filter { $0.split(separator: "/").contains { $0.hasPrefix(".") } }
    let visible = everything.filter { !hidden.contains($0) }
    counts.leftover = hidden.count
    counts.delivered = visible.count
    var found: [String: Int] = [:]
    let digests = try await CrashTrialTests.sha256(visible.map { intake.appending(path: $0) })
    for digest in digests { found[digest, default: 0] += 1 }
    // Claims at names a kiosk reported as possible leftovers (a claim it could not prove
    // removable, so it left it and said so) are counted apart. An empty one only at names no
    // kiosk delivered an empty upload to: every delivery is in a `forwarded` event, under
    // its own name or in `renamed`, and only `empty.txt` is empty, so an empty file at a name
    // of `big.bin` or `note.txt` is never one (a killed kiosk may have delivered `empty.txt`
    // under its own name without saying so, hence that name is never excused). Any other empty
    // file beyond the empty uploads is a duplicate.
    let forwarded = everyProcess.flatMap { $0.process.events }.filter { $0.event == "forwarded" }
    let reported = Set(
      forwarded.flatMap { ($0["possibleLeftovers"] as? [[String: String]]) ?? [] }
        .compactMap { $0["path"] })
    let emptySource = Self.fileNames[2]
    let deliveredTo = Set(
      forwarded.flatMap { ($0["renamed"] as? [[String: String]]) ?? [] }
        .filter { $0["from"] == emptySource }.compactMap { $0["to"] }
    ).union([emptySource])
    let reportedEmpty =
      zip(visible, digests).filter {
        reported.contains($0.0) && !deliveredTo.contains($0.0) && $0.1 == Self.emptyDigest
      }.count
    found[Self.emptyDigest, default: 0] -= reportedEmpty
    // A reported claim that holds its attempt's line (`browserdrop claim <id>`): no upload
    // looks like that, so it is never a delivery. One that was not reported stays extra.
    var reportedLines = 0
    for (name, digest) in zip(visible, digests) where reported.contains(name) {
      guard let data = try? Data(contentsOf: intake.appending(path: name)), Self.isClaimLine(data)
      else { continue }
      found[digest, default: 0] -= 1
      reportedLines += 1
    }
    counts.reported = reportedEmpty + reportedLines
    counts.delivered -= counts.reported
    for (digest, times) in uploaded {
      counts.lost += max(0, times - found[digest, default: 0])
      counts.duplicated += max(0, found[digest, default: 0] - times)
    }
    for (digest, times) in found where uploaded[digest] == nil { counts.extra += times }
    if !counts.clean {
      let odd = zip(visible, digests).filter { found[$0.1]! > uploaded[$0.1, default: 0] }
      let sizes = odd.map { name, _ in
        "\(name) (\((try? FileManager.default.attributesOfItem(atPath: intake.appending(path: name).path)[.size]) ?? "?") B)"
      }
      print("fleet \(plan.place): beyond their uploads: \(sizes); hidden: \(hidden)")
      let missing = uploadedFrom.filter { found[$0.key, default: 0] < uploaded[$0.key]! }
      let short = missing.values.flatMap { $0 }.sorted()
      print("fleet \(plan.place): fewer copies than uploads of: \(short)")
      let faults = "kill rounds \(killRounds.sorted()), outages \(outageRounds.sorted())"
      print("fleet \(plan.place): \(faults)")
      for (kiosk, process) in everyProcess {
        for line in process.outputLines { print("fleet \(plan.place): kiosk \(kiosk): \(line)") }
        print("fleet \(plan.place): kiosk \(kiosk) stderr: \(process.errorText)")
      }
    }
    return counts
  }

  /// Waits until every kiosk has closed this round's batch and forwarded everything it holds.
  private func drain(round: Int, after marks: [Int], restarted: Set<Int>) async throws {
    for (kiosk, process) in processes.enumerated() {
      // A kiosk restarted this round closed its batch before the kill (it had started to
      // forward it); the new process has it in the outbox, or nothing if it was done.
      let restarted = restarted.contains(kiosk)
      let journal = folder.path("staging\(kiosk)/outbox/journal")
      try await CrashTrialTests.waitUntil(
        "kiosk \(kiosk)'s outbox to drain in round \(round)", timeout: 120,
        every: .milliseconds(50), output: { process.outputLines }
      ) {
        let closed =
          restarted || process.events.dropFirst(marks[kiosk]).contains { $0.event == "batchClosed" }
        return closed
          && CrashTrialTests.entries(journal).allSatisfy { $0.hasPrefix(".") }
          && Self.openBatchIsEmpty(folder.path("staging\(kiosk)"))
      }
    }
  }

  /// Whether an upload that ended without an answer was started by the kiosk (after `mark`)
  /// and then failed as its batch closed: the switch's grace for uploads in flight ran out
  /// before it arrived whole. Anything else without an answer (a request never served, one cut
  /// otherwise) is a failure. The kiosk's lines may trail the client's end: waited for, bounded.
  private static func cutByGrace(
    _ name: String, by kiosk: CommandProcess, after mark: Int
  ) async throws -> Bool {
    guard
      (try? await kiosk.waitForEvent(
        "uploadFailed", after: mark, timeout: 10, where: { $0.string("path") == name })) != nil
    else { return false }
    let before = Array(kiosk.events.dropFirst(mark))
    guard
      let started = before.firstIndex(where: {
        $0.event == "uploadStarted" && $0.string("path") == name
      }),
      let failed = before[started...].firstIndex(where: {
        $0.event == "uploadFailed" && $0.string("path") == name
      }),
      // Cut by the session stopping (not a lost connection or anything else), in the session
      // it started in: no batch closed between its start and its failure.
      before[failed].string("reason") == FailureReason.cancelled.description,
      !before[started..<failed].contains(where: { $0.event == "batchClosed" })
    else { return false }
    // The batch it was cut from closes after the failure (the switch's report follows the cut).
    _ = try await kiosk.waitForEvent("batchClosed", after: mark + failed, timeout: 60)
    return true
  }

  /// SHA-256 of no bytes.
  private static let emptyDigest =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

  /// The files each kiosk is given per round: `big.bin` (the plan's size), a 1000-byte
  /// `note.txt` and an empty `empty.txt`.
  private static let fileNames = ["big.bin", "note.txt", "empty.txt"]

  /// Whether no session folder of the staging root holds a complete file (an upload answered
  /// 201 that is not yet in a batch).
  /// Whether `data` is a claim's line: `browserdrop claim `, 16 hex digits, a newline.
  private static func isClaimLine(_ data: Data) -> Bool {
    let text = String(decoding: data, as: UTF8.self)
    guard text.hasPrefix("browserdrop claim "), text.hasSuffix("\n") else { return false }
    let id = text.dropFirst("browserdrop claim ".count).dropLast()
    return id.count == 16 && id.allSatisfy(\.isHexDigit)
  }

  private static func openBatchIsEmpty(_ staging: URL) -> Bool {
    CrashTrialTests.entries(staging).filter { $0.hasPrefix("session-") }.allSatisfy {
      TemporaryFolder.files(in: staging.appending(path: $0)).isEmpty
    }
  }
}

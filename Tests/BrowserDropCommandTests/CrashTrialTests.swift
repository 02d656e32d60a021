import BrowserDropTestSupport
import Foundation
import Testing

/// `kill -9` of the kiosk at seeded, varied moments, then a restart with the same staging root
/// and destination: once the outbox has drained (judged from the JSON events), every file that
/// was answered 201 is at the destination exactly once and byte-identical (SHA-256), and nothing
/// else is: no partial, no temporary file, no "x 2.bin", nothing left in the outbox.
///
/// 30 trials: 10 during uploads (after k of n were answered 201, with the rest mid-body at a
/// seeded offset), 10 around the close of a batch, 10 in the middle of forwarding 16–32 MiB
/// files. Each trial uses its own folders and ports; only the PIDs started here are killed.
@Suite("Crash trials: kill -9 and restart", .serialized)
struct CrashTrialTests {
  /// A small deterministic generator (SplitMix64), so a failing trial can be replayed.
  struct Seeded: RandomNumberGenerator {
    var state: UInt64

    init(_ seed: Int) {
      state = 0x9E37_79B9_7F4A_7C15 &* UInt64(seed + 1)
    }

    mutating func next() -> UInt64 {
      state &+= 0x9E37_79B9_7F4A_7C15
      var z = state
      z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
      z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
      return z ^ (z >> 31)
    }
  }

  @Test("kill -9 after k of n uploads got their 201, the rest mid-body", arguments: 0..<10)
  func killDuringUploads(trial: Int) async throws {
    var random = Seeded(trial)
    let folder = try TemporaryFolder()
    let command = try KioskTests.start(folder, quietPeriod: "60")
    defer { Task { await command.stop() } }
    let port = try await command.listeningPort()

    let count = Int.random(in: 2...5, using: &random)
    let complete = Int.random(in: 0...count, using: &random)
    var sources: [String: URL] = [:]
    for index in 0..<count {
      let name = index % 2 == 0 ? "f\(index).bin" : "folder \(trial)/sub/f\(index).bin"
      let size = index < complete ? Int.random(in: 0...300_000, using: &random) : 3_000_000
      sources[name] = try folder.makeFile("src/\(index).bin", size: size, seed: UInt8(index + 1))
    }
    let names = sources.keys.sorted()
    var answered: Set<String> = []
    for name in names.prefix(complete) {
      let status = try await Uploader.upload(sources[name]!, as: name, port: port)
      #expect(status == 201, "\(name)")
      if status == 201 { answered.insert(name) }
    }
    // The others are in flight, slowly (the server writes a partial in steps of ~320 KiB, so
    // they are large enough to stay in flight for seconds); the kill lands when one of them
    // has a seeded number of body bytes in its partial file.
    let inFlight = try names.dropFirst(complete).map { name in
      (name, try Uploader.start(sources[name]!, as: name, port: port, rate: "1M"))
    }
    if !inFlight.isEmpty {
      let offset = Int64.random(in: 1...2_000_000, using: &random)
      do {
        try await Self.waitUntil("a partial of \(offset) bytes", timeout: 20) {
          Self.partialSizes(in: folder.path("staging"), pid: command.pid).contains {
            $0 >= offset
          }
        }
      } catch {
        throw HarnessError(
          description: "\(error): \(Self.allFiles(in: folder.path("staging"))) "
            + "\(Self.partialSizes(in: folder.path("staging"), pid: command.pid)) "
            + "\(command.outputLines)")
      }
    }
    try await Self.sigkill(command)
    for (name, upload) in inFlight where try await Uploader.status(of: upload) == 201 {
      answered.insert(name)  // answered just before the kill: it must be delivered too
    }

    try await Self.restartAndCheck(
      folder, quietPeriod: "60",
      expected: sources.filter { answered.contains($0.key) })
  }

  /// Where a kill lands around the close of a batch.
  enum BatchMoment: CaseIterable {
    /// Right after the last 201: the batch is still the open session.
    case afterLastUpload
    /// The journal entry exists; the session folder may not have moved into the outbox yet.
    case journalWritten
    /// `batchClosed` was printed; forwarding has not necessarily started.
    case batchClosed
    /// `forwardStarted` was printed.
    case forwardStarted
    /// The first file is in the destination.
    case firstDelivered
  }

  @Test("kill -9 around the close of a batch, before forwarding", arguments: 0..<10)
  func killAroundBatchClose(trial: Int) async throws {
    var random = Seeded(100 + trial)
    let moment = BatchMoment.allCases[trial % BatchMoment.allCases.count]
    let folder = try TemporaryFolder()
    // A quiet period well above the gap between two uploads on a loaded machine, so they make
    // one batch.
    let command = try KioskTests.start(folder, quietPeriod: "3")
    defer { Task { await command.stop() } }
    let port = try await command.listeningPort()

    var sources: [String: URL] = [:]
    for index in 0..<Int.random(in: 2...6, using: &random) {
      let size = Int.random(in: 1...400_000, using: &random)
      sources["d\(index % 2)/c\(index).bin"] = try folder.makeFile(
        "src/\(index).bin", size: size, seed: UInt8(40 + index))
    }
    for (name, file) in sources.sorted(by: { $0.key < $1.key }) {
      #expect(try await Uploader.upload(file, as: name, port: port) == 201, "\(name)")
    }
    let journal = folder.path("staging/outbox/journal")
    let dest = folder.path("dest")
    switch moment {
    case .afterLastUpload: break
    case .journalWritten:
      // The entry is written just before `batchClosed` and lives only as long as the delivery,
      // so a look can miss it under load. The first later point seen is where the kill lands
      // then: `batchClosed` printed, or a file at the destination; what was hit is printed.
      let events = command.events.count
      var reached = ""
      try await Self.waitUntil(
        "a journal entry", timeout: 60, every: .milliseconds(2),
        output: { command.outputLines }
      ) {
        if Self.entries(journal).contains(where: { $0.hasSuffix(".json") && !$0.hasPrefix(".") }) {
          reached = "journal entry"
        } else if command.events.dropFirst(events).contains(where: { $0.event == "batchClosed" }) {
          reached = "batchClosed (journal entry missed)"
        } else if !Self.allFiles(in: dest).isEmpty {
          reached = "a delivered file (journal entry missed)"
        }
        return !reached.isEmpty
      }
      print("crash trial \(trial) (\(moment)): killed at \(reached)")
    case .batchClosed: try await command.waitForEvent("batchClosed", timeout: 60)
    case .forwardStarted: try await command.waitForEvent("forwardStarted", timeout: 60)
    case .firstDelivered:
      try await Self.waitUntil(
        "a delivered file", timeout: 60, every: .milliseconds(2),
        output: { command.outputLines }
      ) {
        !TemporaryFolder.files(in: dest).isEmpty
      }
    }
    try await Self.sigkill(command)

    try await Self.restartAndCheck(folder, quietPeriod: "3", expected: sources)
  }

  @Test("kill -9 in the middle of forwarding large files to a local folder", arguments: 0..<10)
  func killMidForward(trial: Int) async throws {
    var random = Seeded(200 + trial)
    let folder = try TemporaryFolder()
    let command = try KioskTests.start(folder, quietPeriod: "0.3")
    defer { Task { await command.stop() } }
    let port = try await command.listeningPort()

    var sources: [String: URL] = [:]
    for index in 0..<3 {
      let size =
        Int.random(in: 16...32, using: &random) << 20 + Int.random(in: 0...9, using: &random)
      sources["big\(index).bin"] = try folder.makeFile(
        "src/\(index).bin", size: size, seed: UInt8(80 + 3 * trial + index))
    }
    // All three at once (the default limit is 3 in flight), so the batch can't close between
    // them.
    let uploads = try sources.sorted(by: { $0.key < $1.key }).map { name, file in
      (name, try Uploader.start(file, as: name, port: port))
    }
    for (name, upload) in uploads {
      #expect(try await Uploader.status(of: upload) == 201, "\(name)")
    }
    // Kill when the delivery reaches a seeded step: the k-th file's temporary file appears
    // (it is being written), or the k-th file's final name appears (installed, maybe not yet
    // recorded as delivered in the manifest).
    let step = Int.random(in: 0..<5, using: &random)
    let dest = folder.path("dest")
    try await Self.waitUntil("delivery step \(step)", timeout: 60, every: .milliseconds(2)) {
      let entries = Self.allFiles(in: dest)
      let installed = entries.filter { !$0.split(separator: "/").last!.hasPrefix(".") }.count
      let writing = entries.contains { $0.hasSuffix(".part") }
      // A temporary file that came and went between two looks: the next step will do.
      return (step % 2 == 0 && installed >= step / 2 && writing) || installed > step / 2
    }
    try await Self.sigkill(command)

    try await Self.restartAndCheck(folder, quietPeriod: "0.3", expected: sources)
  }

  /// The one crash point a poll can't hit: where renameat2(RENAME_NOREPLACE) is unavailable a
  /// local install is `link(temporary, final)` then `unlink(temporary)`, so a kill between the
  /// two leaves the final file complete, the temporary file still there (the same inode), and
  /// the manifest saying `installing`. The state is built by hand, exactly as that kill leaves
  /// it, and the kiosk restarted on it: the resume must accept the file once, untouched.
  @Test("kill -9 between installing a file and removing its temporary name")
  func killBetweenLinkAndUnlink() async throws {
    let folder = try TemporaryFolder()
    let source = try folder.makeFile("src/a.bin", size: 300_000, seed: 9)
    let outbox = folder.path("staging/outbox")
    let batch = outbox.appending(path: "1")
    let target = folder.path("dest/batch 1")
    for made in [outbox.appending(path: "journal"), batch, target] {
      try FileManager.default.createDirectory(at: made, withIntermediateDirectories: true)
    }
    try FileManager.default.copyItem(at: source, to: batch.appending(path: "a.bin"))
    try Data(#"{"number":1,"folderName":"batch 1","source":"session-crashed"}"#.utf8)
      .write(to: outbox.appending(path: "journal/1.json"))
    try Data("2\n".utf8).write(to: outbox.appending(path: "next"))
    let record =
      #"{"destination":"file://\#(target.path)","size":300000,"source":"a.bin","#
      + #""state":"installing","target":["a.bin"]}"#
    try Data((record + "\n").utf8).write(to: batch.appending(path: ".browserdrop-forwarded"))
    try FileManager.default.copyItem(at: source, to: target.appending(path: "a.bin"))
    // The forwarder's temporary name: FNV-1a of the source path.
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in "a.bin".utf8 {
      hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
    }
    let hex = String(hash, radix: 16)
    let temporary = ".browserdrop-" + String(repeating: "0", count: 16 - hex.count) + hex + ".part"
    #expect(link(target.appending(path: "a.bin").path, target.appending(path: temporary).path) == 0)

    try await Self.restartAndCheck(folder, quietPeriod: "60", expected: ["a.bin": source])
  }

  // MARK: - Helpers

  /// Sends SIGKILL to the command started by this trial and waits for it.
  static func sigkill(_ command: CommandProcess) async throws {
    command.send(SIGKILL)
    _ = try await command.waitForExit(timeout: 20)
    #expect(command.terminationSignal == SIGKILL, "the command had already exited")
  }

  /// Restarts the kiosk on the same staging root and destination, waits until every batch it
  /// recovered has been forwarded (its `notice` says how many; one `forwarded` event each),
  /// stops it, and checks the destination holds exactly `expected` (destination path under
  /// `batch 1/` → source) byte for byte, and that the outbox is empty. Every issue is a failure:
  /// a copy delivered twice ("x 2.bin") included.
  static func restartAndCheck(
    _ folder: TemporaryFolder, quietPeriod: String, expected: [String: URL]
  ) async throws {
    let restarted = try KioskTests.start(folder, quietPeriod: quietPeriod)
    defer { Task { await restarted.stop() } }
    _ = try await restarted.listeningPort()
    // Recovery runs before `listening`; its notice starts with the number of batches.
    let recovered =
      restarted.events.first {
        $0.event == "notice" && ($0.string("message") ?? "").contains("earlier run")
      }
      .flatMap { Int(($0.string("message") ?? "").prefix { $0.isNumber }) } ?? 0
    let forwarded = try await restarted.waitForEvents(
      "forwarded", count: recovered, failing: "forwardFailed", timeout: 60)
    for event in forwarded {
      #expect((event["renamed"] as? [Any])?.isEmpty == true, "\(event)")
    }
    restarted.send(SIGTERM)
    #expect(try await restarted.waitForExit() == 0)
    let stopped = restarted.events.last
    #expect(
      stopped?.event == "stopped" && stopped?["staging"] is NSNull, "\(String(describing: stopped))"
    )

    // Each file sits in its batch's folder (`batch 1`, or `batch 2` when a batch closed between
    // two uploads); compared without that first component, so a copy in two batches shows.
    let dest = folder.path("dest")
    let found = Self.allFiles(in: dest)
    let inBatch = found.map { $0.split(separator: "/").dropFirst().joined(separator: "/") }
    #expect(inBatch.sorted() == expected.keys.sorted(), "\(found)\n\(restarted.outputLines)")
    if inBatch.sorted() == expected.keys.sorted(), !found.isEmpty {
      let delivered = found.map { dest.appending(path: $0) }
      let sources = inBatch.map { expected[$0]! }
      let digests = try await Self.sha256(delivered + sources)
      #expect(
        Array(digests.prefix(delivered.count)) == Array(digests.suffix(delivered.count)),
        "a delivered file differs from its source")
    }
    let outbox = Self.entries(folder.path("staging/outbox"))
    #expect(Set(outbox).subtracting(["journal", "next"]).isEmpty, "outbox: \(outbox)")
    let journal = Self.entries(folder.path("staging/outbox/journal"))
    #expect(journal.isEmpty, "journal: \(journal)")
    let staged = Self.allFiles(in: folder.path("staging")).filter {
      // The two lock files stay: the command's, and the resumable store's (held per session).
      ![".browserdrop.lock", ".browserdrop-resumable/.lock", "outbox/next"].contains($0)
    }
    #expect(staged.isEmpty, "left in staging: \(staged)")
  }

  /// Every regular file under `folder`, hidden ones included, relative and sorted.
  static func allFiles(in folder: URL) -> [String] {
    guard let walker = FileManager.default.enumerator(atPath: folder.path) else { return [] }
    var result: [String] = []
    while let name = walker.nextObject() as? String {
      if (walker.fileAttributes?[.type] as? FileAttributeType) == .typeRegular {
        result.append(name)
      }
    }
    return result.sorted()
  }

  /// The names in a folder (none when it does not exist).
  static func entries(_ folder: URL) -> [String] {
    (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
  }

  /// Sizes of the partial files of uploads in flight under the staging root, as the command
  /// `pid` has them open. Partial files are anonymous (`O_TMPFILE`) where the volume allows, so
  /// they have no name to list: they are found through /proc/PID/fd, whose links point into the
  /// session's incoming folder (named partials are found the same way).
  static func partialSizes(in staging: URL, pid: pid_t) -> [Int64] {
    let descriptors = "/proc/\(pid)/fd"
    let root = staging.standardizedFileURL.path + "/"
    return entries(URL(filePath: descriptors)).compactMap { fd in
      let link = descriptors + "/" + fd
      guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: link),
        target.hasPrefix(root), target.contains(".incoming/")
      else { return nil }
      var info = stat()
      guard stat(link, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
      return Int64(info.st_size)
    }
  }

  /// Polls `condition` (a file-system state no event line announces) until it holds; on a
  /// timeout the error carries `output` (the command's lines so far).
  static func waitUntil(
    _ what: String, timeout: Double, every interval: Duration = .milliseconds(5),
    output: () -> [String] = { [] }, _ condition: () -> Bool
  ) async throws {
    let deadline = Date().addingTimeInterval(timeout)
    while !condition() {
      guard Date() < deadline else {
        throw HarnessError(
          description: "timed out waiting for \(what)\n\(output().joined(separator: "\n"))")
      }
      try await Task.sleep(for: interval)
    }
  }

  /// SHA-256 digests (hex) of `files`, in order, from one `sha256sum` run.
  static func sha256(_ files: [URL]) async throws -> [String] {
    let (termination, output) = try await ChildProcess.run(
      "/usr/bin/sha256sum", ["--"] + files.map(\.path), error: .inherit)
    let lines = String(decoding: output, as: UTF8.self).split(separator: "\n")
    guard termination == .exited(0), lines.count == files.count else {
      throw HarnessError(description: "sha256sum failed: \(termination) \(lines)")
    }
    return lines.map { String($0.prefix(64)) }
  }
}

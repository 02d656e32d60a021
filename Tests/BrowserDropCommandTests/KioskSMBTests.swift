import BrowserDropTestSupport
import Foundation
import Testing

/// The kiosk forwarding to a real smbd on 127.0.0.1 (scripts/smbd.sh): a server that goes away
/// before or during a batch, and a wrong password. The batch stays in the outbox, the reason is
/// a plain sentence naming the host, and once the fault is fixed every file arrives exactly
/// once, byte-identical (read back from the share's folder on this disk).
@Suite("Kiosk forwarding to a real smbd", .serialized)
struct KioskSMBTests {
  @Test(
    "smbd stopped before or during a batch: the batch waits, then arrives once",
    arguments: [false, true])
  func serverStopped(duringForward: Bool) async throws {
    _ = try LoopbackSMB.shared()
    let folder = try TemporaryFolder()
    // A second smbd of this test's own, on its own port, so stopping it disturbs no other test.
    let base = folder.path("smbd")
    try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
    let smbPort = try FreePort.closed()
    if duringForward { try await LoopbackSMB.run("up", base: base, port: smbPort) }
    do {
      try await Self.runServerStopped(
        folder, base: base, smbPort: smbPort, duringForward: duringForward)
    } catch {
      try? await LoopbackSMB.run("down", base: base, port: smbPort)
      throw error
    }
    try await LoopbackSMB.run("down", base: base, port: smbPort)
  }

  private static func runServerStopped(
    _ folder: TemporaryFolder, base: URL, smbPort: Int, duringForward: Bool
  ) async throws {
    let command = try KioskTests.start(
      folder, quietPeriod: "3", ["--to", "smb://127.0.0.1:\(smbPort)/guest/intake"])
    defer { Task { await command.stop() } }
    let port = try await command.listeningPort()
    var sources: [String: URL] = [:]
    let size = duringForward ? 48 << 20 : 200_000
    for index in 0..<3 {
      sources["in/s\(index).bin"] = try folder.makeFile(
        "src/\(index).bin", size: size + index, seed: UInt8(7 + index))
    }
    // At once, so they make one batch.
    let uploads = try sources.sorted(by: { $0.key < $1.key }).map { name, file in
      (name, try Uploader.start(file, as: name, port: port))
    }
    for (name, upload) in uploads {
      #expect(try await Uploader.status(of: upload) == 201, "\(name)")
    }
    if duringForward {
      try await command.waitForEvent("forwardStarted")
      try await LoopbackSMB.run("down", base: base, port: smbPort)
    }

    // Down (from the start, or stopped under the delivery): the batch stays and the reason is
    // a sentence naming the host.
    let failed = try await command.waitForEvent("forwardFailed", timeout: 60)
    let message = failed.string("message") ?? ""
    #expect(message.contains("127.0.0.1"), "\(message)")
    #expect(message.hasSuffix("."), "\(message)")
    #expect(
      !["errno", "Error Domain", "(null)", "smb://", "NT_STATUS"].contains {
        message.contains($0)
      }, "\(message)")
    // smbd going away under a write makes libsmbclient fail with ENETRESET (or ECONNRESET,
    // EPIPE…): "Lost the connection…". The stop can also land between two files: "Couldn't
    // reach…" (connection refused at the next connect).
    #expect(
      message.hasPrefix("Couldn't reach 127.0.0.1") || message.hasPrefix("Lost the connection"),
      "\(message)")
    #expect(failed.string("staging")?.contains("/outbox/") == true, "\(failed)")
    let retrying = try await command.waitForEvent("retrying")
    #expect((retrying.int("seconds") ?? 0) > 0)
    #expect(KioskTests.journal(folder).count == 1)
    #expect(
      TemporaryFolder.files(in: folder.path("staging/outbox/1")) == sources.keys.sorted(),
      "the batch must stay whole in the outbox")

    // Back up: the retry delivers everything once.
    let seen = command.events.count
    try await LoopbackSMB.run("up", base: base, port: smbPort)
    let forwarded = try await command.waitForEvent("forwarded", after: seen, timeout: 90)
    #expect((forwarded["renamed"] as? [Any])?.isEmpty == true, "\(forwarded)")
    command.send(SIGTERM)
    #expect(try await command.waitForExit() == 0)
    #expect(KioskTests.journal(folder).isEmpty)
    let share = base.appending(path: "shares/guest/intake")
    try await Self.expectDelivered(sources, in: share)
  }

  @Test("A wrong password keeps the batch and says so; the right one delivers it once")
  func wrongPassword() async throws {
    let server = try LoopbackSMB.shared()
    let folder = try TemporaryFolder()
    let subfolder = "kiosk-\(UUID().uuidString.prefix(8))"
    let destination = "smb://dropper@127.0.0.1:\(server.port)/private/\(subfolder)"
    // Both uploads must land in one batch: a quiet period the test client, starved of the
    // shared pool in a full parallel run, can't outlast between them (0.3 s once split them).
    let start = { (password: String) in
      try CommandProcess(
        [
          "--kiosk", "--json", "--port", "0", "--bind", "127.0.0.1", "--quiet-period", "3",
          "--staging", folder.path("staging").path, "--to", destination,
          "--batch-folder", "batch {n}",
        ], environment: ["BROWSERDROP_SMB_PASSWORD": password])
    }
    let command = try start("not-the-password")
    defer { Task { await command.stop() } }
    let port = try await command.listeningPort()
    let sources = [
      "a.bin": try folder.makeFile("src/a.bin", size: 70_000, seed: 1),
      "deep/b.bin": try folder.makeFile("src/b.bin", size: 1, seed: 2),
    ]
    for (name, file) in sources.sorted(by: { $0.key < $1.key }) {
      #expect(try await Uploader.upload(file, as: name, port: port) == 201)
    }
    let failed = try await command.waitForEvent("forwardFailed", timeout: 60)
    #expect(
      failed.string("message")
        == "127.0.0.1 rejected the user name or password. Check the user in --to and the "
        + "password (BROWSERDROP_SMB_PASSWORD, --smb-password-file or the smb-password credential)."
    )
    try await command.waitForEvent("retrying")
    command.send(SIGTERM)
    #expect(try await command.waitForExit() == 0)
    let stopped = try #require(command.events.last)
    #expect(stopped.event == "stopped")
    #expect(stopped.string("message")?.contains("1 batch wait") == true, "\(stopped)")
    #expect(stopped.string("staging")?.hasSuffix("outbox") == true)
    #expect(KioskTests.journal(folder).count == 1)
    #expect(TemporaryFolder.files(in: folder.path("staging/outbox/1")) == sources.keys.sorted())
    #expect(!command.outputLines.joined().contains("not-the-password"))

    // Restarted with the right password: the batch from the outbox arrives once.
    let fixed = try start("s3cret")
    defer { Task { await fixed.stop() } }
    let forwarded = try await fixed.waitForEvent("forwarded", timeout: 60)
    #expect(forwarded.int("files") == 2)
    fixed.send(SIGTERM)
    #expect(try await fixed.waitForExit() == 0)
    #expect(KioskTests.journal(folder).isEmpty)
    let share = server.base.appending(path: "shares/private/\(subfolder)")
    try await Self.expectDelivered(sources, in: share)
  }

  @Test("The password from a file, the environment or a systemd credential signs in; never shown")
  func passwordSources() async throws {
    let server = try LoopbackSMB.shared()
    let folder = try TemporaryFolder()
    let subfolder = "password-\(UUID().uuidString.prefix(8))"
    let destination = "smb://dropper@127.0.0.1:\(server.port)/private/\(subfolder)"
    let passwordFile = folder.path("password")
    try Data("s3cret\n".utf8).write(to: passwordFile)
    let credentials = folder.path("credentials")
    try FileManager.default.createDirectory(at: credentials, withIntermediateDirectories: true)
    try Data("s3cret".utf8).write(to: credentials.appending(path: "smb-password"))
    let wrongCredentials = folder.path("wrong-credentials")
    try FileManager.default.createDirectory(at: wrongCredentials, withIntermediateDirectories: true)
    try Data("wrong-credential".utf8).write(to: wrongCredentials.appending(path: "smb-password"))
    // Each source in turn, with a wrong password in the sources it takes precedence over.
    let sources: [(name: String, arguments: [String], environment: [String: String])] = [
      (
        "file", ["--smb-password-file", passwordFile.path],
        [
          "BROWSERDROP_SMB_PASSWORD": "wrong-environment",
          "CREDENTIALS_DIRECTORY": wrongCredentials.path,
        ]
      ),
      (
        "environment", [],
        ["BROWSERDROP_SMB_PASSWORD": "s3cret", "CREDENTIALS_DIRECTORY": wrongCredentials.path]
      ),
      ("credential", [], ["CREDENTIALS_DIRECTORY": credentials.path]),
    ]
    let file = try folder.makeFile("src/a.txt", size: 1000)
    for source in sources {
      // The plain display, which names the destination in its lines.
      let command = try CommandProcess(
        [
          "--port", "0", "--bind", "127.0.0.1", "--staging", folder.path("staging").path,
          "--to", destination, "--batch-folder", source.name,
        ] + source.arguments, environment: source.environment)
      defer { Task { await command.stop() } }
      let port = try await OneShotTests.plainPort(command)
      #expect(try await Uploader.upload(file, as: "a.txt", port: port) == 201)
      command.send(SIGINT)
      #expect(try await command.waitForExit(timeout: 90) == 0, "\(source.name)")
      let everything = command.outputLines.joined(separator: "\n") + command.errorText
      #expect(
        everything.contains("Forwarded 1 file (1000 B) to \(destination)/\(source.name)"),
        "\(source.name): \(everything)")
      for secret in ["s3cret", "wrong-environment", "wrong-credential"] {
        #expect(!everything.contains(secret), "\(source.name) printed a password")
      }
      let share = server.base.appending(path: "shares/private/\(subfolder)/\(source.name)")
      #expect(TemporaryFolder.files(in: share) == ["a.txt"], "\(source.name)")
    }
  }

  // MARK: - Helpers

  /// Checks `share` holds exactly `batch 1/<name>` for each source, byte-identical (SHA-256),
  /// and nothing else: no temporary file, no claim, no renamed copy.
  private static func expectDelivered(_ sources: [String: URL], in share: URL) async throws {
    let expected = sources.keys.sorted().map { "batch 1/" + $0 }
    let found = CrashTrialTests.allFiles(in: share)
    #expect(found == expected)
    guard found == expected else { return }
    let digests = try await CrashTrialTests.sha256(
      expected.map { share.appending(path: $0) } + sources.keys.sorted().map { sources[$0]! })
    #expect(Array(digests.prefix(expected.count)) == Array(digests.suffix(expected.count)))
  }
}

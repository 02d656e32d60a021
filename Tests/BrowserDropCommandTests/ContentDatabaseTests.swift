import BrowserDropTestSupport
import Foundation
import Testing

/// A missing or broken libmagic database stops the command at start-up with one clear message,
/// before it listens; it is never a crash, nor an error per upload. libmagic reads the database
/// path from `MAGIC`, so the tests point it at files they make.
@Suite("Content database at start-up")
struct ContentDatabaseTests {
  private static func arguments(_ folder: TemporaryFolder, _ extra: [String] = []) -> [String] {
    ["--json", "--port", "0", "--bind", "127.0.0.1", "--staging", folder.path("staging").path]
      + extra
  }

  @Test("A missing database: one stopped event naming it, exit 1, never listening")
  func missingDatabase() async throws {
    let folder = try TemporaryFolder()
    let missing = folder.path("nowhere/magic").path
    let run = try await CommandProcess.run(
      Self.arguments(folder), environment: ["MAGIC": missing])
    #expect(run.status == 1)
    let lines = run.output.split(separator: "\n").map(String.init)
    #expect(lines.count == 1, "\(run.output)")
    let event = try #require(
      try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
    #expect(event["event"] as? String == "stopped")
    let message = event["message"] as? String ?? ""
    #expect(message.hasPrefix("Can't load the file-type database (libmagic): "), "\(message)")
    #expect(message.contains(missing) && message.contains("MAGIC"), "\(message)")
    #expect(!run.output.contains("listening"))
  }

  @Test("A database of the wrong version: the message names the file, in plain output too")
  func brokenDatabase() async throws {
    let folder = try TemporaryFolder()
    // A compiled database's header (magic number, version 99), then zeros.
    let broken = folder.path("future.mgc")
    try Data([0x1C, 0x04, 0x1E, 0xF1, 99, 0, 0, 0] + [UInt8](repeating: 0, count: 4_088))
      .write(to: broken)
    let command = try CommandProcess(
      ["--port", "0", "--bind", "127.0.0.1", "--staging", folder.path("staging").path],
      environment: ["MAGIC": broken.path])
    command.closeInput()
    #expect(try await command.waitForExit(timeout: 30) == 1)
    #expect(command.terminationSignal == nil)
    let errorLines = command.errorText.split(separator: "\n")
    #expect(errorLines.count == 1, "\(command.errorText)")
    let line = String(errorLines.first ?? "")
    #expect(line.contains("Can't load the file-type database (libmagic)"), "\(line)")
    #expect(line.contains(broken.path) && line.contains("version"), "\(line)")
  }

  @Test("With --content-check off the database is not needed")
  func offNeedsNoDatabase() async throws {
    let folder = try TemporaryFolder()
    let command = try CommandProcess(
      Self.arguments(folder, ["--content-check", "off"]),
      environment: ["MAGIC": folder.path("nowhere/magic").path])
    defer { Task { await command.stop() } }
    let port = try await command.listeningPort()
    let file = try folder.makeFile("a.mp3", size: 10_000, seed: 3)
    #expect(try await Uploader.upload(file, as: "a.mp3", port: port) == 201)
    let finished = try await command.waitForEvent("uploadFinished")
    #expect(finished["mimeType"] == nil || finished["mimeType"] is NSNull)
    command.send(SIGINT)
    #expect(try await command.waitForExit() == 0)
  }
}

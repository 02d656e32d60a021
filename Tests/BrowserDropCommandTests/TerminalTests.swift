import BrowserDropTestSupport
import Foundation
import Testing

/// The terminal display, driven through tmux: the QR code and a live progress line.
@Suite("Terminal display")
struct TerminalTests {
  /// A tmux server of the test's own (its own socket), killed at the end.
  final class Tmux: Sendable {
    let socket = "browserdrop-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"

    /// Runs tmux through `ChildProcess` with its output in a file: the tmux server it forks
    /// keeps the client's standard output open, so a pipe would never reach its end (and
    /// Foundation's `Process` would never see the client exit).
    @discardableResult
    func run(_ arguments: [String]) async throws -> String {
      let capture = FileManager.default.temporaryDirectory.appending(
        path: "\(socket)-\(UUID()).txt")
      defer { try? FileManager.default.removeItem(at: capture) }
      _ = try await ChildProcess.run(
        "/usr/bin/tmux", ["-L", socket] + arguments, output: .file(capture.path), error: .null,
        timeout: .seconds(20))
      return String(decoding: (try? Data(contentsOf: capture)) ?? Data(), as: UTF8.self)
    }

    func screen() async throws -> String {
      try await run(["capture-pane", "-p", "-t", "drop", "-S", "-200"])
    }

    func waitForScreen(
      timeout: Double = 30, _ what: String, _ condition: (String) -> Bool
    ) async throws -> String {
      let deadline = Date().addingTimeInterval(timeout)
      while Date() < deadline {
        let screen = try await screen()
        if condition(screen) { return screen }
        try await Task.sleep(for: .milliseconds(50))
      }
      throw HarnessError(
        description: "timed out waiting for \(what); screen:\n\(try await screen())")
    }

    /// Ends the tmux server and the command in it.
    func stop() async {
      _ = try? await run(["kill-server"])
    }
  }

  @Test("On a terminal: addresses, the QR code, a live progress line, then the summary")
  func terminal() async throws {
    let folder = try TemporaryFolder()
    let tmux = Tmux()
    defer { Task { await tmux.stop() } }
    let command = [
      CommandProcess.binary.path, "--port", "0", "--bind", "127.0.0.1", "--staging",
      folder.path("staging").path, "--to", folder.path("dest").path,
    ].map { "'" + $0 + "'" }.joined(separator: " ")
    try await tmux.run([
      "new-session", "-d", "-s", "drop", "-x", "120", "-y", "60", command + "; sleep 30",
    ])
    let screen = try await tmux.waitForScreen("the address") { $0.contains("Scan to open") }
    #expect(screen.contains("(other, lo)"))
    // The QR code: half blocks, at least a dozen rows of them.
    let qrRows = screen.split(separator: "\n").filter { $0.contains("▀") || $0.contains("▄") }
    #expect(qrRows.count >= 12, "\(screen)")
    let url = try #require(
      screen.split(separator: " ").first { $0.hasPrefix("http://127.0.0.1:") })
    let port = try #require(URL(string: String(url))?.port)
    // What a phone camera would see: the half blocks read back as modules and decoded by zbar.
    let scanLine = try #require(
      screen.split(separator: "\n").first { $0.hasPrefix("Scan to open ") })
    #expect(try await QRScan.decode(screen) == String(scanLine.dropFirst("Scan to open ".count)))
    #expect(scanLine.hasSuffix(String(url)))

    let file = try folder.makeFile("movie.mov", size: 3_000_000)
    let upload = try Uploader.start(file, as: "Holiday/movie.mov", port: port, rate: "300K")
    let live = try await tmux.waitForScreen("a progress line") { screen in
      screen.split(separator: "\n").contains { line in
        line.contains("Holiday/movie.mov") && line.contains("%") && line.contains("/s")
          && line.contains("left")
      }
    }
    #expect(live.contains("1 in flight"))
    #expect(try await Uploader.status(of: upload) == 201)
    _ = try await tmux.waitForScreen("the finished line") {
      $0.contains("✓ Received Holiday/movie.mov")
    }
    // A name with a line separator (the server refuses the C0 and C1 controls) shows escaped.
    let small = try folder.makeFile("note.txt", size: 5)
    #expect(try await Uploader.upload(small, as: "evil\u{2028}name.txt", port: port) == 201)
    let escaped = try await tmux.waitForScreen("the escaped name") {
      $0.contains("✓ Received evil\\u{2028}name.txt")
    }
    #expect(!escaped.unicodeScalars.contains { $0.value == 0x2028 })
    #expect(escaped.contains("2 files received"), "\(escaped)")
    // An upload cut off half-way scrolls up as failed and is counted in the summary.
    let cut = try Uploader.startFed(as: "cut.bin", size: 100_000, port: port)
    defer { cut.cut() }
    #expect(cut.write(Data(repeating: 1, count: 10_000)))
    _ = try await tmux.waitForScreen("the cut upload in flight") { $0.contains("1 in flight") }
    cut.cut()
    let failed = try await tmux.waitForScreen("the failed line") {
      $0.contains("✗ Failed cut.bin: The connection was lost before the whole file arrived.")
    }
    #expect(failed.contains("2 files received (2.9 MiB) · 1 failed"), "\(failed)")
    try await tmux.run(["send-keys", "-t", "drop", "Enter"])
    let done = try await tmux.waitForScreen("the summary") { $0.contains("Forwarded 2 files") }
    #expect(done.contains("Forwarded 2 files (2.9 MiB)"))
    #expect(
      TemporaryFolder.files(in: folder.path("dest")) == [
        "Holiday/movie.mov", "evil\u{2028}name.txt",
      ])
  }

  @Test("--no-qr leaves the QR code out")
  func noQRCode() async throws {
    let folder = try TemporaryFolder()
    let tmux = Tmux()
    defer { Task { await tmux.stop() } }
    let command = [
      CommandProcess.binary.path, "--no-qr", "--port", "0", "--bind", "127.0.0.1", "--staging",
      folder.path("staging").path,
    ].map { "'" + $0 + "'" }.joined(separator: " ")
    try await tmux.run([
      "new-session", "-d", "-s", "drop", "-x", "100", "-y", "40", command + "; sleep 30",
    ])
    let screen = try await tmux.waitForScreen("the address") { $0.contains("http://127.0.0.1:") }
    #expect(!screen.contains("▀") && !screen.contains("▄"))
    try await tmux.run(["send-keys", "-t", "drop", "Enter"])
    _ = try await tmux.waitForScreen("the end") { $0.contains("Nothing arrived.") }
  }
}

/// Reads a QR code drawn in half blocks back from a screen capture and decodes it with zbarimg
/// (Debian's zbar-tools), as a phone camera would.
enum QRScan {
  /// The text of the first QR code on `screen`, or `nil` when zbar finds none.
  static func decode(_ screen: String) async throws -> String? {
    let lines = screen.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    let isCode = { (line: String) in line.contains { "█▀▄".contains($0) } }
    guard let first = lines.firstIndex(where: isCode) else { return nil }
    let code = lines[first...].prefix(while: isCode)
    // Each character is two modules, one above the other; tmux drops trailing spaces (light).
    let width = code.map(\.count).max() ?? 0
    var modules: [[Bool]] = []
    for line in code {
      let cells = Array(line) + Array(repeating: " ", count: width - line.count)
      modules.append(cells.map { $0 == "█" || $0 == "▀" })
      modules.append(cells.map { $0 == "█" || $0 == "▄" })
    }
    // A portable bitmap, 4 pixels a module, with a quiet zone of 4 modules all round.
    let scale = 4
    let quiet = 4
    let side = (width + 2 * quiet) * scale
    let height = (modules.count + 2 * quiet) * scale
    var pbm = "P1\n\(side) \(height)\n"
    for y in 0..<height {
      let row = y / scale - quiet
      var pixels = ""
      for x in 0..<side {
        let column = x / scale - quiet
        let dark =
          row >= 0 && row < modules.count && column >= 0 && column < width
          && modules[row][column]
        pixels += dark ? "1 " : "0 "
      }
      pbm += pixels + "\n"
    }
    let file = FileManager.default.temporaryDirectory.appending(path: "qr-\(UUID()).pbm")
    try Data(pbm.utf8).write(to: file)
    defer { try? FileManager.default.removeItem(at: file) }
    let (termination, output) = try await ChildProcess.run(
      "/usr/bin/zbarimg", ["-q", "--raw", file.path], error: .inherit, timeout: .seconds(30))
    guard termination == .exited(0) else { return nil }
    return String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
  }
}

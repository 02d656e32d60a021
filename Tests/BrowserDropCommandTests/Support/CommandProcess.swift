import Foundation
import Synchronization
import Testing

/// Errors of the test harness, with what was seen so far.
struct HarnessError: Error, CustomStringConvertible {
  let description: String
}

/// The built `browserdrop` binary, run as a subprocess with its standard streams captured.
///
/// Output is read by a dedicated thread per stream; waits poll the captured lines with a
/// deadline, so a test never sleeps in the hope that something happened.
final class CommandProcess: Sendable {
  /// Where the binary is: `BROWSERDROP_BINARY`, or next to the test bundle.
  static var binary: URL {
    if let path = ProcessInfo.processInfo.environment["BROWSERDROP_BINARY"] {
      return URL(filePath: path)
    }
    let executable = URL(filePath: "/proc/self/exe").resolvingSymlinksInPath()
    var folder = executable.deletingLastPathComponent()
    // On some layouts the runner is inside the .xctest bundle.
    for _ in 0..<4 {
      let candidate = folder.appending(path: "browserdrop")
      if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
      folder = folder.deletingLastPathComponent()
    }
    return executable.deletingLastPathComponent().appending(path: "browserdrop")
  }

  private struct Captured {
    var stdout = Data()
    var stderr = Data()
    var stdoutClosed = false
    var stderrClosed = false
  }

  private let process: Process
  private let input: Pipe
  private let captured = Mutex(Captured())

  /// The process ID, for signals.
  var pid: Int32 { process.processIdentifier }

  /// Starts `browserdrop arguments` with `environment` added to a clean environment.
  init(_ arguments: [String], environment: [String: String] = [:]) throws {
    process = Process()
    process.executableURL = Self.binary
    process.arguments = arguments
    var env = ["PATH": "/usr/bin:/bin", "HOME": NSTemporaryDirectory(), "LANG": "C.UTF-8"]
    env.merge(environment) { $1 }
    process.environment = env
    input = Pipe()
    let output = Pipe()
    let errors = Pipe()
    process.standardInput = input
    process.standardOutput = output
    process.standardError = errors
    try process.run()
    startReading(output.fileHandleForReading, isStandardOutput: true)
    startReading(errors.fileHandleForReading, isStandardOutput: false)
  }

  private func startReading(_ handle: FileHandle, isStandardOutput: Bool) {
    let thread = Thread { [self] in
      while true {
        let data = handle.availableData
        self.captured.withLock { state in
          if isStandardOutput {
            state.stdout.append(data)
            if data.isEmpty { state.stdoutClosed = true }
          } else {
            state.stderr.append(data)
            if data.isEmpty { state.stderrClosed = true }
          }
        }
        if data.isEmpty { return }
      }
    }
    thread.start()
  }

  /// Complete lines written to standard output so far.
  var outputLines: [String] {
    let data = captured.withLock { $0.stdout }
    let text = String(decoding: data, as: UTF8.self)
    var lines = text.components(separatedBy: "\n")
    lines.removeLast()
    return lines
  }

  /// Everything written to standard error so far.
  var errorText: String {
    String(decoding: captured.withLock { $0.stderr }, as: UTF8.self)
  }

  /// Standard output's lines parsed as JSON objects; a line that isn't one fails the test.
  var events: [JSONObject] {
    outputLines.map { line in
      guard let data = line.data(using: .utf8),
        let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
      else {
        Issue.record("not a JSON object line: \(line)")
        return JSONObject([:])
      }
      return JSONObject(object)
    }
  }

  /// Waits until a JSON line with `"event": name` (and matching `where`) has been written, and
  /// returns it. `after` skips events before that index.
  @discardableResult
  func waitForEvent(
    _ name: String, after start: Int = 0, timeout: Double = 30,
    where condition: (JSONObject) -> Bool = { _ in true }
  ) async throws -> JSONObject {
    try await waitFor("event \(name)", timeout: timeout) {
      let events = self.events
      guard start < events.count else { return nil }
      return events[start...].first { $0.event == name && condition($0) }
    }
  }

  /// Waits until `count` JSON lines with `"event": name` have been written (from `start` on) and
  /// returns them. Fails at once, with the output so far, when a `failing` event shows up.
  @discardableResult
  func waitForEvents(
    _ name: String, count: Int, after start: Int = 0, failing: String? = nil,
    timeout: Double = 30
  ) async throws -> [JSONObject] {
    try await waitFor("\(count) \(name) events", timeout: timeout) { () -> [JSONObject]? in
      let events = self.events
      guard start < events.count else { return count == 0 ? [] : nil }
      if let failing, let bad = events[start...].first(where: { $0.event == failing }) {
        Issue.record("\(failing): \(bad)")
        return []
      }
      let matching = events[start...].filter { $0.event == name }
      return matching.count >= count ? matching : nil
    }
  }

  /// Waits until a line of standard output contains `text`.
  @discardableResult
  func waitForLine(containing text: String, timeout: Double = 30) async throws -> String {
    try await waitFor("a line containing \(text)", timeout: timeout) {
      self.outputLines.first { $0.contains(text) }
    }
  }

  /// The port from the `listening` event.
  func listeningPort(timeout: Double = 30) async throws -> Int {
    let listening = try await waitForEvent("listening", timeout: timeout)
    guard let addresses = listening["addresses"] as? [[String: Any]],
      let url = (addresses.first?["url"] as? String).flatMap(URL.init(string:)), let port = url.port
    else { throw HarnessError(description: "no address in \(listening)") }
    return port
  }

  /// Writes a line to standard input (Enter).
  func pressEnter() {
    input.fileHandleForWriting.write(Data("\n".utf8))
  }

  /// Closes standard input (end of input).
  func closeInput() {
    try? input.fileHandleForWriting.close()
  }

  /// Sends `signal` to the process.
  func send(_ signal: Int32) {
    kill(process.processIdentifier, signal)
  }

  /// Waits for the process to exit and for its output to be read; returns the exit status.
  func waitForExit(timeout: Double = 60) async throws -> Int32 {
    _ = try await waitFor("exit", timeout: timeout) { () -> Bool? in
      guard !self.process.isRunning else { return nil }
      return self.captured.withLock { $0.stdoutClosed && $0.stderrClosed } ? true : nil
    }
    return process.terminationStatus
  }

  /// Whether the process exited because of a signal, and which.
  var terminationSignal: Int32? {
    process.terminationReason == .uncaughtSignal ? process.terminationStatus : nil
  }

  /// Kills the process if it still runs (SIGKILL, by PID) and waits for it.
  func stop() async {
    if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    _ = try? await waitForExit(timeout: 20)
  }

  private func waitFor<Value>(
    _ what: String, timeout: Double, _ probe: () -> Value?
  ) async throws -> Value {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
      if let value = probe() { return value }
      try await Task.sleep(for: .milliseconds(20))
    }
    if let value = probe() { return value }
    throw HarnessError(
      description: "timed out waiting for \(what)\nstdout:\n\(outputLines.joined(separator: "\n"))"
        + "\nstderr:\n\(errorText)")
  }

  /// Runs `browserdrop arguments` to the end with nothing on standard input.
  static func run(
    _ arguments: [String], environment: [String: String] = [:]
  ) async throws -> (
    status: Int32, output: String, error: String
  ) {
    let command = try CommandProcess(arguments, environment: environment)
    command.closeInput()
    let status = try await command.waitForExit(timeout: 30)
    return (status, command.outputLines.joined(separator: "\n"), command.errorText)
  }
}

/// A JSON object from an event line.
struct JSONObject: @unchecked Sendable, CustomStringConvertible {
  let object: [String: Any]

  init(_ object: [String: Any]) {
    self.object = object
  }

  var event: String? { object["event"] as? String }

  subscript(key: String) -> Any? { object[key] }

  func int(_ key: String) -> Int? { (object[key] as? NSNumber)?.intValue }

  func string(_ key: String) -> String? { object[key] as? String }

  var description: String { "\(object)" }
}

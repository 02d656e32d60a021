import BrowserDropTestSupport
import Foundation
import Glibc
import Testing

/// The built `browserdrop` binary, run as a subprocess with its standard streams captured.
///
/// Spawned with `posix_spawn` (`ChildProcess`): output is read by a dedicated thread per stream
/// and the exit reaped by another; waits poll the captured lines with a deadline, so a test never
/// sleeps in the hope that something happened.
final class CommandProcess: Sendable {
  /// Where the binary is: `BROWSERDROP_BINARY`, or next to the test bundle.
  static var binary: URL {
    if let path = ProcessInfo.processInfo.environment["BROWSERDROP_BINARY"] {
      return URL(filePath: path)
    }
    return ChildProcess.product("browserdrop")
  }

  private let child: ChildProcess

  /// The process ID, for signals.
  var pid: Int32 { child.pid }

  /// Starts `browserdrop arguments` with `environment` added to a clean environment. With a
  /// `launcher` (a program and its arguments, such as `unshare -n`), that program is started
  /// with the binary and `arguments` after its own; it must exec the binary in its place.
  init(
    _ arguments: [String], environment: [String: String] = [:], launcher: [String] = []
  ) throws {
    var env = ["PATH": "/usr/bin:/bin", "HOME": NSTemporaryDirectory(), "LANG": "C.UTF-8"]
    env.merge(environment) { $1 }
    if let program = launcher.first {
      child = try ChildProcess(
        program, Array(launcher.dropFirst()) + [Self.binary.path] + arguments, environment: env,
        input: .pipe)
    } else {
      child = try ChildProcess(Self.binary.path, arguments, environment: env, input: .pipe)
    }
  }

  /// Complete lines written to standard output so far.
  var outputLines: [String] {
    let data = child.output
    let text = String(decoding: data, as: UTF8.self)
    var lines = text.components(separatedBy: "\n")
    lines.removeLast()
    return lines
  }

  /// Everything written to standard error so far.
  var errorText: String {
    String(decoding: child.errorOutput, as: UTF8.self)
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
    child.write(Data("\n".utf8))
  }

  /// Closes standard input (end of input).
  func closeInput() {
    child.closeInput()
  }

  /// Sends `signal` to the process (never once it has been reaped).
  func send(_ signal: Int32) {
    child.signal(signal)
  }

  /// Waits for the process to exit and for its output to be read; returns the exit status (the
  /// signal's number when a signal ended it).
  func waitForExit(timeout: Double = 60) async throws -> Int32 {
    guard let termination = await child.wait(timeout: .milliseconds(Int(timeout * 1000))) else {
      let state = child.termination.map { "exited (\($0)), output still open" } ?? "running"
      throw HarnessError(
        description: "timed out waiting for exit (\(state))\nstdout:\n"
          + "\(outputLines.joined(separator: "\n"))\nstderr:\n\(errorText)")
    }
    return termination.status
  }

  /// Whether the process exited because of a signal, and which.
  var terminationSignal: Int32? {
    if case .signalled(let signal) = child.termination { return signal }
    return nil
  }

  /// Kills the process if it still runs (SIGKILL, by PID) and waits for it.
  func stop() async {
    child.signal(SIGKILL)
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

package import Foundation
import Glibc

extension ChildProcess {
  /// A program's run to its end: how it ended and both its outputs as text.
  package struct Captured: Sendable {
    /// How it ended.
    package var termination: Termination
    /// The exit code, or the signal's number.
    package var status: Int32 { termination.status }
    /// Standard output.
    package var output: String
    /// Standard error.
    package var errorOutput: String
  }

  /// Runs a program to the end with nothing on standard input and returns how it ended and its
  /// standard output; kills it (by its PID) after `timeout` and throws.
  package static func run(
    _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
    output: Stream = .pipe, error: Stream = .null, limits: [Limit] = [],
    timeout: Duration = .seconds(60)
  ) async throws -> (termination: Termination, output: Data) {
    let child = try ChildProcess(
      executable, arguments, environment: environment, output: output, error: error,
      limits: limits)
    let termination = try await child.end(within: timeout, [executable] + arguments)
    return (termination, child.output)
  }

  /// Runs a program to the end with nothing on standard input and both outputs captured; kills
  /// it (by its PID) after `timeout` and throws.
  package static func capture(
    _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
    limits: [Limit] = [], timeout: Duration = .seconds(60)
  ) async throws -> Captured {
    let child = try ChildProcess(
      executable, arguments, environment: environment, output: .pipe, error: .pipe,
      limits: limits)
    let termination = try await child.end(within: timeout, [executable] + arguments)
    return Captured(
      termination: termination, output: String(decoding: child.output, as: UTF8.self),
      errorOutput: String(decoding: child.errorOutput, as: UTF8.self))
  }

  private func end(within timeout: Duration, _ command: [String]) async throws -> Termination {
    guard let termination = await wait(timeout: timeout) else {
      signal(SIGKILL)
      _ = await wait(timeout: .seconds(10))
      throw HarnessError(
        description: "\(command.joined(separator: " ")) did not finish in \(timeout)")
    }
    return termination
  }

  /// A program this package builds (`browserdrop`, `BrowserDropTestHost`, …): next to the test
  /// runner, which on some layouts sits inside the .xctest bundle.
  package static func product(_ name: String) -> URL {
    let executable = URL(filePath: "/proc/self/exe").resolvingSymlinksInPath()
    var folder = executable.deletingLastPathComponent()
    for _ in 0..<4 {
      let candidate = folder.appending(path: name)
      if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
      folder = folder.deletingLastPathComponent()
    }
    return executable.deletingLastPathComponent().appending(path: name)
  }
}

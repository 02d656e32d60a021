import Foundation
import Glibc
import Testing

/// A program built by this package, run to its end with its output captured.
struct ChildRun {
  struct TimedOut: Error, CustomStringConvertible {
    let command: [String]
    var description: String { "\(command.joined(separator: " ")) did not end in time" }
  }

  var status: Int32
  var output: String
  var errorOutput: String

  /// A product next to the test bundle (the runner may sit inside the .xctest bundle).
  static func product(_ name: String) -> URL {
    var folder = URL(filePath: "/proc/self/exe").resolvingSymlinksInPath()
      .deletingLastPathComponent()
    for _ in 0..<4 {
      let candidate = folder.appending(path: name)
      if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
      folder = folder.deletingLastPathComponent()
    }
    return URL(filePath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
      .appending(path: name)
  }

  /// Runs `executable arguments` with `environment` and waits for it to end; a run that takes
  /// longer than `timeout` is killed (by its PID) and throws.
  static func run(
    _ executable: String, _ arguments: [String], environment: [String: String],
    timeout: Duration = .seconds(60)
  ) async throws -> ChildRun {
    let process = Process()
    process.executableURL = URL(filePath: executable)
    process.arguments = arguments
    process.environment = environment
    let output = Pipe()
    let errors = Pipe()
    process.standardOutput = output
    process.standardError = errors
    process.standardInput = FileHandle.nullDevice
    let ended = AsyncStream<Int32>.makeStream()
    process.terminationHandler = { ended.continuation.yield($0.terminationStatus) }
    // Both pipes are drained on threads of their own (never on the two cooperative threads the
    // servers under test need) while the child runs, so that a full pipe never stalls it.
    async let outputData = Self.readToEnd(output.fileHandleForReading)
    async let errorData = Self.readToEnd(errors.fileHandleForReading)
    do {
      try process.run()
    } catch {
      // The readers end when no one holds a pipe's writing end any more.
      try? output.fileHandleForWriting.close()
      try? errors.fileHandleForWriting.close()
      _ = await (outputData, errorData)
      throw error
    }
    let pid = process.processIdentifier
    let watchdog = Task { () -> Bool in
      do { try await Task.sleep(for: timeout) } catch { return false }
      kill(pid, SIGKILL)
      return true
    }
    var iterator = ended.stream.makeAsyncIterator()
    let status = await iterator.next() ?? -1
    watchdog.cancel()
    let fired = await watchdog.value
    let run = ChildRun(
      status: status, output: String(decoding: await outputData, as: UTF8.self),
      errorOutput: String(decoding: await errorData, as: UTF8.self))
    if fired { throw TimedOut(command: [executable] + arguments) }
    return run
  }

  private static func readToEnd(_ handle: FileHandle) async -> Data {
    await withCheckedContinuation { continuation in
      Thread.detachNewThread { continuation.resume(returning: handle.readDataToEndOfFile()) }
    }
  }
}

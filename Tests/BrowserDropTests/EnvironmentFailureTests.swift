import BrowserDropTestSupport
import Foundation
import Testing

/// The library never crashes its host for an environment failure: each case runs a real server
/// in a process of its own (BrowserDropFaultHost), since the failure would reach every other
/// test sharing this process's descriptor table or event loop.
@Suite struct EnvironmentFailureTests {
  /// Runs the fault host in `mode`, again (up to 3 runs in all) when libdispatch rather than the
  /// library ended it while it held every descriptor (exit status 75; see the host's
  /// `reportTrapsInsideDispatch`).
  private func runHost(_ mode: String) async throws -> ChildProcess.Captured {
    var run: ChildProcess.Captured
    var attempts = 0
    repeat {
      attempts += 1
      let staging = FileManager.default.temporaryDirectory.appending(
        path: "browserdrop-fault-\(UUID().uuidString)")
      defer { try? FileManager.default.removeItem(at: staging) }
      run = try await ChildProcess.capture(
        ChildProcess.product("BrowserDropFaultHost").path, [mode, staging.path],
        environment: ProcessInfo.processInfo.environment, timeout: .seconds(120))
    } while run.termination == .exited(75) && attempts < 3
    return run
  }

  @Test func startWithoutDescriptorsThrowsAtEachStepThenSucceeds() async throws {
    let run = try await runHost("descriptors")
    #expect(run.status == 0, "exit status \(run.status): \(run.errorOutput)")
    let lines = run.output.split(separator: "\n").map(String.init)
    // Each step of start() that needs a descriptor fails in turn, as a BrowserDropError naming
    // what it was for: the staging folder, libmagic's database, the event loop, the socket.
    #expect(lines.dropLast().allSatisfy { $0.contains(": BrowserDropError: ") }, "\(lines)")
    #expect(lines.contains { $0.contains("Can't use the staging folder") })
    #expect(lines.contains { $0.contains("Can't load the file-type database") })
    #expect(
      lines.contains {
        $0.contains("Can't start listening: eventfd") || $0.contains("epoll_create1")
      })
    #expect(lines.contains { $0.contains("Can't listen on port 0") })
    // The same server, once descriptors are free, starts and answers.
    #expect(lines.last?.hasSuffix(": started, answers HTTP/1.1 200 OK") == true, "\(lines)")
  }

  /// A connection queued while `accept4` fails for want of descriptors is accepted once some
  /// are free, with no other connection arriving to wake the loop (readiness is edge-triggered:
  /// the accept loop must try again, not wait for an edge that a queue that didn't change never
  /// gives).
  @Test func aConnectionQueuedWhileOutOfDescriptorsIsServedOnceSomeAreFree() async throws {
    let run = try await runHost("accept-full")
    #expect(run.status == 0, "exit status \(run.status): \(run.errorOutput)")
    let lines = run.output.split(separator: "\n").map(String.init)
    #expect(lines == ["connected while out of descriptors", "answers HTTP/1.1 200 OK"])
  }

  @Test func aFailedEventLoopInterruptsTheSessionAndResumeMakesANewOne() async throws {
    let run = try await runHost("event-loop")
    #expect(run.status == 0, "exit status \(run.status): \(run.errorOutput)")
    let lines = run.output.split(separator: "\n").map(String.init)
    #expect(lines.count == 3, "\(lines)")
    #expect(lines.first == "listening, answers HTTP/1.1 200 OK")
    #expect(lines.dropFirst().first == "interrupted")
    // A request through the new loop: its epoll set works with the listener registered anew.
    #expect(lines.last == "resumed, answers HTTP/1.1 200 OK")
  }
}

import BrowserDropTestSupport
import Foundation
import Testing

/// What only a network namespace of the command's own can show (root, as in CI): it holds only
/// a loopback that is down, so listening on every interface reaches nothing outside the test,
/// an interface the test adds lives and dies with the command, and ports 80 and 8080 are free.
@Suite("Addresses")
struct AddressesTests {
  @Test("A new network address is announced with its kind (addressesChanged), in --json and plain")
  func addressesChanged() async throws {
    for json in [true, false] {
      let folder = try TemporaryFolder()
      let command = try CommandProcess(
        (json ? ["--json"] : []) + ["--port", "0", "--staging", folder.path("staging").path],
        launcher: ["/usr/bin/unshare", "--net"])
      defer { Task { await command.stop() } }
      let port: Int
      if json {
        let listening = try await command.waitForEvent("listening")
        let first = try #require(listening["addresses"] as? [[String: String]])
        // Nothing reachable from a LAN yet: the loopback address, as a last resort.
        #expect(first.count == 1, "\(first)")
        let url = try #require(first.first?["url"].flatMap(URL.init(string:)))
        #expect(url.host == "127.0.0.1" && first.first?["kind"] == "other")
        port = try #require(url.port)
      } else {
        port = try await OneShotTests.plainPort(command)
      }

      try await Self.addInterface(inNamespaceOf: command.pid)
      let expected = "http://10.213.0.1:\(port)/"
      if json {
        let changed = try await command.waitForEvent("addressesChanged") { event in
          (event["addresses"] as? [[String: String]])?.contains { $0["url"] == expected } == true
        }
        #expect(
          changed["addresses"] as? [[String: String]] == [
            ["url": expected, "kind": "other", "interface": "lan0"]
          ])
      } else {
        try await command.waitForLine(containing: "  \(expected)  (other, lan0)")
        #expect(command.outputLines.contains("The addresses changed:"))
      }
      command.send(SIGINT)
      #expect(try await command.waitForExit() == 0)
    }
  }

  @Test("The default port 80, when not permitted, falls back to 8080")
  func defaultPortFallsBack() async throws {
    let folder = try TemporaryFolder()
    // Root without CAP_NET_BIND_SERVICE, in a namespace of its own: port 80 is refused (EACCES)
    // and 8080 is surely free.
    let command = try CommandProcess(
      ["--json", "--bind", "127.0.0.1", "--staging", folder.path("staging").path],
      launcher: [
        "/usr/bin/unshare", "--net", "/usr/bin/setpriv", "--bounding-set", "-net_bind_service",
        "--inh-caps", "-net_bind_service",
      ])
    defer { Task { await command.stop() } }
    let listening = try await command.waitForEvent("listening")
    #expect(
      listening["addresses"] as? [[String: String]] == [
        ["url": "http://127.0.0.1:8080/", "kind": "other", "interface": "lo"]
      ])
    command.send(SIGINT)
    #expect(try await command.waitForExit() == 0)
  }

  /// Adds a veth pair (`lan0` with 10.213.0.1/24, and its peer) inside the network namespace of
  /// process `pid`.
  private static func addInterface(inNamespaceOf pid: Int32) async throws {
    let script = """
      ip link add lan0 type veth peer name lan1 && ip addr add 10.213.0.1/24 dev lan0 \
      && ip link set lan1 up && ip link set lan0 up
      """
    let (termination, _) = try await ChildProcess.run(
      "/usr/bin/nsenter", ["-t", String(pid), "-n", "/bin/sh", "-c", script],
      environment: ["PATH": "/usr/bin:/bin:/usr/sbin:/sbin"], error: .inherit,
      timeout: .seconds(30))
    guard termination == .exited(0) else {
      throw HarnessError(description: "could not add an interface in the namespace of \(pid)")
    }
  }
}

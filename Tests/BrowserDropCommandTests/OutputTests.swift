import BrowserDropTestSupport
import Foundation
import Glibc
import Testing

/// Standard output is written by a thread of its own: a reader that stops reading holds no
/// upload back (events are reported on the server's event loop), and nothing is lost or
/// reordered once it reads again.
@Suite("Standard output")
struct OutputTests {
  @Test("Uploads go on while nobody reads standard output; every line comes later, in order")
  func anUnreadOutputHoldsNoUploadBack() async throws {
    let folder = try TemporaryFolder()
    let dest = folder.path("dest")
    // browserdrop's standard output is a pipe whose reader passes the first line (`listening`,
    // for the port) to standard error, then reads nothing until the test writes a line.
    let script = """
      exec 9<&0
      "$0" "$@" </dev/null | {
        IFS= read -r first; printf '%s\\n' "$first" >&2
        IFS= read -r go <&9
        exec cat
      }
      """
    let arguments = [
      "-c", script, CommandProcess.binary.path, "--json", "--port", "0", "--bind", "127.0.0.1",
      "--staging", folder.path("staging").path, "--to", dest.path,
    ]
    let environment = ["PATH": "/usr/bin:/bin", "HOME": NSTemporaryDirectory(), "LANG": "C.UTF-8"]
    let shell = try ChildProcess("/bin/sh", arguments, environment: environment, input: .pipe)
    defer { shell.signal(SIGKILL) }
    let port = try await Self.listeningPort(shell)
    let browserdrop = try #require(Self.child(of: shell.pid, named: "browserdrop"))
    defer { kill(browserdrop, SIGKILL) }

    // About 150 KiB of event lines: more than twice what a pipe holds.
    let count = 1_000
    for index in 0..<count {
      let status = try await Self.upload(
        path: Self.name(index), body: Array("line \(index)\n".utf8), port: port)
      try #require(status == 201, "upload \(index) answered \(status)")
    }
    #expect(shell.output.isEmpty)

    _ = shell.write(Data("go\n".utf8))
    #expect(kill(browserdrop, SIGINT) == 0)
    let termination = await shell.wait(timeout: .seconds(60))
    #expect(termination == .exited(0))

    let events = String(decoding: shell.output, as: UTF8.self).split(separator: "\n").map {
      line -> (event: String, path: String?) in
      let object = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
      return (object?["event"] as? String ?? "not JSON: \(line)", object?["path"] as? String)
    }
    let uploads = events.filter { $0.event.hasPrefix("upload") }
    let expected = (0..<count).flatMap { index in
      [("uploadStarted", Self.name(index)), ("uploadFinished", Self.name(index))]
    }
    #expect(uploads.count == expected.count)
    #expect(zip(uploads, expected).allSatisfy { $0.event == $1.0 && $0.path == $1.1 })
    #expect(events.last?.event == "forwarded")
    #expect(TemporaryFolder.files(in: dest).count == count)
  }

  private static func name(_ index: Int) -> String {
    "notes/n" + String(repeating: "0", count: 4 - String(index).count) + "\(index).txt"
  }

  /// The port from the `listening` line the script copies to standard error.
  private static func listeningPort(_ shell: ChildProcess) async throws -> Int {
    let deadline = ContinuousClock.now + .seconds(30)
    while ContinuousClock.now < deadline {
      let text = String(decoding: shell.errorOutput, as: UTF8.self)
      if let line = text.split(separator: "\n").first(where: { $0.contains("listening") }),
        let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
        let addresses = object["addresses"] as? [[String: Any]],
        let url = (addresses.first?["url"] as? String).flatMap(URL.init(string:)),
        let port = url.port
      {
        return port
      }
      try await Task.sleep(for: .milliseconds(20))
    }
    throw HarnessError(
      description:
        "no listening line; stderr: \(String(decoding: shell.errorOutput, as: UTF8.self))")
  }

  /// The child of `parent` whose command name is `name` (the test started it, through the shell).
  private static func child(of parent: pid_t, named name: String) -> pid_t? {
    let list =
      (try? String(contentsOfFile: "/proc/\(parent)/task/\(parent)/children", encoding: .utf8))
      ?? ""
    return list.split(separator: " ").compactMap { pid_t($0) }.first { pid in
      let comm = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)
      return comm?.trimmingCharacters(in: .whitespacesAndNewlines) == name
    }
  }

  /// One upload on a connection of its own, every call bounded (`RawClient.timeout`): a server
  /// that stopped answering fails the test instead of hanging it. Returns the status.
  private static func upload(path: String, body: [UInt8], port: Int) async throws -> Int {
    let client = try await RawClient.connect(port: port)
    defer { client.socket.close() }
    let head =
      "POST /upload?path=\(path.replacingOccurrences(of: "/", with: "%2F")) HTTP/1.1\r\n"
      + "Host: 127.0.0.1:\(port)\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"
    try await client.send(Array(head.utf8) + body)
    return try await client.readReply().status
  }
}

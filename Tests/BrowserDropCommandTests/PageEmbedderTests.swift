import BrowserDropTestSupport
import Foundation
import Testing

/// The page embedder (Sources/PageEmbedderTool), run as the build runs it: the keys of the
/// page's `DEFAULT_STRINGS` table become `BundledPageStrings.keys`, whatever shape an entry
/// takes, and a table it can't read fails the build instead of emptying the list.
@Suite("Page embedder")
struct PageEmbedderTests {
  /// The tool as SwiftPM builds it for the plugin, next to the test bundle.
  static var tool: URL? {
    var folder = URL(filePath: "/proc/self/exe").resolvingSymlinksInPath()
      .deletingLastPathComponent()
    for _ in 0..<4 {
      for name in ["PageEmbedderTool-tool", "PageEmbedderTool"] {
        let candidate = folder.appending(path: name)
        if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
      }
      folder = folder.deletingLastPathComponent()
    }
    return nil
  }

  /// What the tool did: its exit status, the Swift it wrote and what it said on standard error.
  struct Embedding {
    let status: Int32
    let swift: String
    let error: String
  }

  /// Runs the tool on a page whose app.js is `script`.
  private static func embed(_ script: String) async throws -> Embedding {
    let tool = try #require(Self.tool, "PageEmbedderTool is not built next to the tests")
    let folder = try TemporaryFolder()
    let page = folder.path("page")
    try FileManager.default.createDirectory(at: page, withIntermediateDirectories: true)
    try Data(script.utf8).write(to: page.appending(path: "app.js"))
    let output = folder.path("out.swift")
    let errors = folder.path("errors")
    let result = try await ChildProcess.run(
      "/bin/sh",
      [
        "-c", "exec \"$0\" \"$1\" \"$2\" 2>\"$3\"", tool.path, page.path, output.path,
        errors.path,
      ])
    let swift = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
    let error = (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
    return Embedding(status: result.termination.status, swift: swift, error: error)
  }

  @Test("Keys are read whatever shape an entry takes")
  func shapes() async throws {
    let script = #"""
      (() => {
        const OTHER = { notAKey: 'x' };
        const DEFAULT_STRINGS = {
          title: 'Upload files', // a comment: with a colon
          /* a block comment, key: 'no' */
          long:
            "Can't reach: the device, {done}, keep it open.",
          'quoted-key': 'q',
          "doubleQuoted": "it's \"fine\"",
          template: `a ${'}'} b`,
          joined: 'a, ' + 'b: c',
          nested: { inner: 'not a key' },
          last: 'no trailing comma'
        };
      })();
      """#
    let result = try await Self.embed(script)
    #expect(result.status == 0, "\(result.error)")
    let keys = result.swift.firstMatch(of: /static let keys: \[String\] = \[([^\]]*)\]/)
      .map { String($0.1) }?
      .split(separator: ",").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
      .filter { !$0.isEmpty }
    #expect(
      keys == [
        "\"title\"", "\"long\"", "\"quoted-key\"", "\"doubleQuoted\"", "\"template\"",
        "\"joined\"", "\"nested\"", "\"last\"",
      ], "\(result.swift.prefix(800))")
    #expect(result.swift.contains("package enum BundledPageStrings"))
    #expect(result.swift.contains("enum BundledPageFiles"))
  }

  @Test("A table that can't be read fails the build with a reason")
  func failures() async throws {
    let cases: [(script: String, reason: String)] = [
      ("const STRINGS = { title: 'x' };", "no `DEFAULT_STRINGS = {` table"),
      ("const DEFAULT_STRINGS = {};", "empty"),
      ("const DEFAULT_STRINGS = { a: 'x', a: 'y' };", "twice"),
      ("const DEFAULT_STRINGS = { title, };", "has no ':'"),
      ("const DEFAULT_STRINGS = { title: 'x'", "not closed"),
    ]
    for (script, reason) in cases {
      let result = try await Self.embed(script)
      #expect(result.status == 1, "\(script)")
      #expect(result.error.contains(reason), "\(script): \(result.error)")
    }
  }
}

import Foundation
import Testing

@testable import BrowserDrop

/// The real files in `Tests/Fixtures/corpus` (their origin is in its README): the sniffer reports
/// for each the MIME type libmagic gives it with the whole database (`expected.tsv`), and the
/// server's decisions on them are the ones the whole database leads to.
struct ContentCorpusTests {
  let sniffer: ContentSniffer

  init() throws {
    sniffer = try ContentSniffer()
  }

  static let folder = URL(filePath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().appending(path: "Fixtures/corpus")

  /// `expected.tsv`: file name → (MIME type, charset or nil).
  static func expected() throws -> [String: (String, String?)] {
    let text = try String(contentsOf: folder.appending(path: "expected.tsv"), encoding: .utf8)
    var table: [String: (String, String?)] = [:]
    for line in text.split(separator: "\n") where !line.hasPrefix("#") {
      let fields = line.split(separator: "\t").map(String.init)
      guard fields.count == 3 else { continue }
      table[fields[0]] = (fields[1], fields[2] == "-" ? nil : fields[2])
    }
    return table
  }

  static func files() throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: folder.path)
      .filter { $0 != "README.md" && $0 != "expected.tsv" }.sorted()
  }

  /// Every file has a row, every row a file, and the sniffer's answer is the row's: the same as
  /// libmagic alone with the whole database. Prints the table docs/content-check.md shows.
  @Test func everyFileGetsLibmagicsAnswer() throws {
    let expected = try Self.expected()
    let files = try Self.files()
    #expect(Set(files) == Set(expected.keys), "corpus files and expected.tsv differ")
    #expect(files.count >= 45)
    var table = "| file | libmagic alone | the sniffer now | kind | path |\n"
    table += "| --- | --- | --- | --- | --- |\n"
    for name in files {
      let data = try Data(contentsOf: Self.folder.appending(path: name))
      let now = sniffer.sniff(data)
      let whole = data.withUnsafeBytes { sniffer.sniffWithWholeDatabase($0) }
      let path = data.prefix(ContentSniffer.prefixLength).withUnsafeBytes {
        sniffer.residual?.verdict($0) ?? .wholeDatabase
      }
      #expect(now == whole, "\(name): \(now.mimeType) vs \(whole.mimeType)")
      if let (mimeType, charset) = expected[name] {
        #expect(whole.mimeType == mimeType, "\(name): libmagic now says \(whole.mimeType)")
        #expect(whole.charset == charset, "\(name): charset \(whole.charset ?? "binary")")
      }
      table += "| \(name) | \(whole.mimeType) | \(now.mimeType) | \(now.kind.rawValue) "
      table += "| \(path) |\n"
    }
    print(table)
  }

  /// The policy's decisions on every corpus file under every kind of name, and on executables
  /// disguised under the corpus files' names, are the ones the whole database leads to: files
  /// are accepted, scripts and executables refused under media, document and text names.
  @Test func decisionsAreTheWholeDatabases() throws {
    let inspector = ContentInspector(policy: .rejectDisguised, sniffer: sniffer)
    let strict = ContentInspector(
      policy: .strict(allowedTypes: ["image/*", "audio/*", "application/pdf"]), sniffer: sniffer)
    let names = try Self.files()
    let extensions = Set(names.map { ContentPolicy.fileExtension(of: $0) } + ["", "bin", "exe"])
    for name in names {
      let data = try Data(contentsOf: Self.folder.appending(path: name))
      let now = sniffer.sniff(data)
      let whole = data.withUnsafeBytes { sniffer.sniffWithWholeDatabase($0) }
      for fileExtension in extensions {
        for policy in [inspector, strict] {
          #expect(
            policy.finding(for: now, fileExtension: fileExtension)
              == policy.finding(for: whole, fileExtension: fileExtension))
        }
        // Only a script (Progress.pm starts `#!/usr/bin/perl`) is refused, and only under a
        // name that promises media, a document or text.
        let refused = inspector.finding(for: now, fileExtension: fileExtension).refusal != nil
        #expect(
          refused == (now.executable != nil && FileExtensionClass(fileExtension) != nil),
          "\(name) as .\(fileExtension)")
      }
    }
    for executable in [try ContentFixtures.elf(), ContentFixtures.shellScript()] {
      let now = sniffer.sniff(executable)
      #expect(now == executable.withUnsafeBytes { sniffer.sniffWithWholeDatabase($0) })
      for name in names {
        let fileExtension = ContentPolicy.fileExtension(of: name)
        let refused = inspector.finding(for: now, fileExtension: fileExtension).refusal != nil
        #expect(refused == (FileExtensionClass(fileExtension) != nil), "\(name)")
      }
    }
  }
}

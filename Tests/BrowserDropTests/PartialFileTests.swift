import Foundation
import Glibc
import Testing

@testable import BrowserDrop

/// Both ways of making a partial file, whichever one this machine's volume picks for sessions:
/// anonymous (`O_TMPFILE` + `linkat`) and named (hidden name + `rename`).
@Suite("Partial files")
struct PartialFileTests {
  private struct Folders {
    let base: URL
    var incoming: String { base.appending(path: "incoming").path }
    var session: String { base.appending(path: "session").path }

    init() throws {
      base = FileManager.default.temporaryDirectory.appending(
        path: "bd-partial-\(UUID().uuidString)")
      try FileManager.default.createDirectory(
        atPath: base.appending(path: "incoming").path, withIntermediateDirectories: true)
      try FileManager.default.createDirectory(
        atPath: base.appending(path: "session").path, withIntermediateDirectories: true)
    }

    func remove() { try? FileManager.default.removeItem(at: base) }

    func entries(_ path: String) -> [String] {
      ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
    }
  }

  private static func write(_ text: String, to partial: PartialFile) {
    let bytes = Array(text.utf8)
    #expect(Glibc.write(partial.fd, bytes, bytes.count) == bytes.count)
  }

  private static func installed(
    _ partial: PartialFile, in folders: Folders, as name: String
  ) throws {
    let folder = open(folders.session, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    #expect(folder >= 0)
    defer { close(folder) }
    try partial.install(in: folder, as: name)
  }

  @Test("The volume under the temporary folder supports anonymous partial files")
  func probe() throws {
    let folders = try Folders()
    defer { folders.remove() }
    // ext4, xfs, btrfs and tmpfs all do; the probe leaves nothing behind.
    #expect(PartialFile.probeKind(in: folders.incoming) == .anonymous)
    #expect(folders.entries(folders.incoming).isEmpty)
  }

  @Test(
    "A partial file is installed under its final name",
    arguments: [
      PartialFile.Kind.anonymous, .named,
    ])
  func install(_ kind: PartialFile.Kind) throws {
    let folders = try Folders()
    defer { folders.remove() }
    let partial = try PartialFile.create(in: folders.incoming, id: 7, kind: kind)
    defer { close(partial.fd) }
    Self.write("hello", to: partial)
    // While it arrives, only a named partial is visible, and only in the incoming folder.
    #expect(folders.entries(folders.incoming) == (kind == .named ? [".upload-7.partial"] : []))
    #expect(folders.entries(folders.session).isEmpty)
    try Self.installed(partial, in: folders, as: "a.txt")
    #expect(folders.entries(folders.incoming).isEmpty)
    #expect(folders.entries(folders.session) == ["a.txt"])
    let text = try String(contentsOfFile: folders.session + "/a.txt", encoding: .utf8)
    #expect(text == "hello")
  }

  @Test(
    "A partial file given up leaves nothing",
    arguments: [
      PartialFile.Kind.anonymous, .named,
    ])
  func discard(_ kind: PartialFile.Kind) throws {
    let folders = try Folders()
    defer { folders.remove() }
    let partial = try PartialFile.create(in: folders.incoming, id: 3, kind: kind)
    Self.write("half", to: partial)
    partial.removeName()
    close(partial.fd)
    #expect(folders.entries(folders.incoming).isEmpty)
    #expect(folders.entries(folders.session).isEmpty)
  }

  /// The server decides whether a name may be replaced (a new upload of the same path replaces
  /// the earlier one); installing then replaces a file, or a link, without following it.
  @Test(
    "Installing replaces what is at the name, never through a link",
    arguments: [
      PartialFile.Kind.anonymous, .named,
    ])
  func replaces(_ kind: PartialFile.Kind) throws {
    let folders = try Folders()
    defer { folders.remove() }
    let victim = folders.base.appending(path: "victim.txt")
    try Data("KEEP".utf8).write(to: victim)
    try Data("OLD".utf8).write(to: URL(filePath: folders.session + "/a.txt"))
    try FileManager.default.createSymbolicLink(
      atPath: folders.session + "/b.txt", withDestinationPath: victim.path)
    for name in ["a.txt", "b.txt"] {
      let partial = try PartialFile.create(in: folders.incoming, id: 1, kind: kind)
      defer { close(partial.fd) }
      Self.write("NEW", to: partial)
      try Self.installed(partial, in: folders, as: name)
      var info = stat()
      #expect(lstat(folders.session + "/" + name, &info) == 0)
      #expect((info.st_mode & S_IFMT) == S_IFREG)
      #expect(try String(contentsOfFile: folders.session + "/" + name, encoding: .utf8) == "NEW")
    }
    #expect(try String(contentsOf: victim, encoding: .utf8) == "KEEP")
    // No hidden name is left beside them.
    #expect(folders.entries(folders.session) == ["a.txt", "b.txt"])
    #expect(folders.entries(folders.incoming).isEmpty)
  }

  @Test("A link planted at a named partial's name is replaced, never written through")
  func plantedLink() throws {
    let folders = try Folders()
    defer { folders.remove() }
    let victim = folders.base.appending(path: "victim.txt")
    try Data("KEEP".utf8).write(to: victim)
    try FileManager.default.createSymbolicLink(
      atPath: folders.incoming + "/.upload-1.partial", withDestinationPath: victim.path)
    let partial = try PartialFile.create(in: folders.incoming, id: 1, kind: .named)
    defer { close(partial.fd) }
    Self.write("OVERWRITTEN", to: partial)
    try Self.installed(partial, in: folders, as: "p.txt")
    #expect(try String(contentsOf: victim, encoding: .utf8) == "KEEP")
    var info = stat()
    #expect(lstat(folders.session + "/p.txt", &info) == 0)
    #expect((info.st_mode & S_IFMT) == S_IFREG)
  }
}

import BrowserDropTestSupport
import Foundation
import Testing

@testable import BrowserDropForwarding

struct SMBDestinationTests {
  @Test func deliversNestedUnicodeTreeToTheGuestShare() async throws {
    let server = try TestSMBServer.fromEnvironment()
    let scratch = try Scratch()
    defer { scratch.remove() }
    let source = try scratch.folder("drop", sampleTree, emptyFolders: ["Leer"])
    let folder = uniqueName("nested")
    let report = try await Forwarder().forward(
      folder: source, to: server.destination("guest", folder + "/in/here"))
    let arrived = server.directory("guest").appendingPathComponent(folder + "/in/here")
    #expect(try contents(of: arrived) == expectedSample())
    #expect(report.renames.isEmpty)
    #expect(report.files.count == sampleTree.count)
    #expect(!FileManager.default.fileExists(atPath: source.path))
  }

  @Test func deliversToThePasswordShareAndVerifiesDigests() async throws {
    let server = try TestSMBServer.fromEnvironment()
    let scratch = try Scratch()
    defer { scratch.remove() }
    let source = try scratch.folder("drop", sampleTree, emptyFolders: ["Leer"])
    let folder = uniqueName("private")
    let destination = try server.destination(
      "private", folder, credentials: Credentials(username: "dropper", password: "s3cret"))
    #expect(destination.description == "smb://dropper@127.0.0.1:\(server.port)/private/\(folder)")
    #expect(!"\(destination.credentials)".contains("s3cret"))
    #expect(!String(reflecting: destination).contains("s3cret"))
    _ = try await Forwarder().forward(folder: source, to: destination, verify: .sha256)
    let arrived = server.directory("private").appendingPathComponent(folder)
    #expect(try contents(of: arrived) == expectedSample())
  }

  @Test func mapsNamesAWindowsShareCannotHold() async throws {
    let server = try TestSMBServer.fromEnvironment()
    let scratch = try Scratch()
    defer { scratch.remove() }
    let source = try scratch.folder(
      "drop",
      [
        "what?.txt": Data("q".utf8), "a:b.txt": Data("colon".utf8), "CON.txt": Data("con".utf8),
        "trail.": Data("dot".utf8), "odd|dir/x.txt": Data("x".utf8),
        "100% done #1.txt": Data("pct".utf8),
      ])
    let folder = uniqueName("names")
    let report = try await Forwarder().forward(
      folder: source, to: server.destination("guest", folder))
    let arrived = server.directory("guest").appendingPathComponent(folder)
    #expect(
      try contents(of: arrived) == [
        "what_.txt": Data("q".utf8), "a_b.txt": Data("colon".utf8), "_CON.txt": Data("con".utf8),
        "trail_": Data("dot".utf8), "odd_dir": Data?.none, "odd_dir/x.txt": Data("x".utf8),
        "100% done #1.txt": Data("pct".utf8),
      ])
    #expect(
      Set(report.renames.map { "\($0.source) -> \($0.destination)" }) == [
        "what?.txt -> what_.txt", "a:b.txt -> a_b.txt", "CON.txt -> _CON.txt",
        "trail. -> trail_", "odd|dir -> odd_dir",
      ])
    #expect(report.renames.allSatisfy { $0.reason == .nameNotAllowed })
  }

  @Test func renamePolicyIsCaseInsensitiveAndMergesFolders() async throws {
    let server = try TestSMBServer.fromEnvironment()
    let scratch = try Scratch()
    defer { scratch.remove() }
    let folder = uniqueName("rename")
    let existing = server.directory("guest").appendingPathComponent(folder)
    try write(
      ["REPORT.PDF": Data("old".utf8), "Fotos/x.png": Data("old x".utf8), "Leer": Data("f".utf8)],
      into: existing)
    try giveToGuest(existing)
    let source = try scratch.folder(
      "drop",
      [
        "report.pdf": Data("new".utf8), "fotos/x.png": Data("new x".utf8),
        "fotos/y.png": Data("y".utf8), "Leer/in.txt": Data("in".utf8),
      ])
    let report = try await Forwarder().forward(
      folder: source, to: server.destination("guest", folder))
    #expect(
      try contents(of: existing) == [
        "REPORT.PDF": Data("old".utf8), "report 2.pdf": Data("new".utf8),
        "Fotos": Data?.none, "Fotos/x.png": Data("old x".utf8), "Fotos/x 2.png": Data("new x".utf8),
        "Fotos/y.png": Data("y".utf8), "Leer": Data("f".utf8), "Leer 2": Data?.none,
        "Leer 2/in.txt": Data("in".utf8),
      ])
    #expect(
      Set(report.renames.map { "\($0.source) -> \($0.destination) \($0.reason)" }) == [
        "report.pdf -> report 2.pdf nameTaken", "fotos/x.png -> fotos/x 2.png nameTaken",
        "Leer -> Leer 2 kindConflict",
      ])
  }

  @Test func replacePolicyOverwrites() async throws {
    let server = try TestSMBServer.fromEnvironment()
    let scratch = try Scratch()
    defer { scratch.remove() }
    let folder = uniqueName("replace")
    let existing = server.directory("guest").appendingPathComponent(folder)
    try write(["report.pdf": Data("old".utf8), "keep.txt": Data("keep".utf8)], into: existing)
    try giveToGuest(existing)
    let source = try scratch.folder("drop", ["report.pdf": Data("new".utf8)])
    let report = try await Forwarder().forward(
      folder: source, to: server.destination("guest", folder), policy: .replace)
    #expect(
      try contents(of: existing) == ["report.pdf": Data("new".utf8), "keep.txt": Data("keep".utf8)])
    #expect(report.renames.isEmpty)
  }

  @Test func failPolicyStopsThenResumesExactlyOnce() async throws {
    let server = try TestSMBServer.fromEnvironment()
    let scratch = try Scratch()
    defer { scratch.remove() }
    let folder = uniqueName("fail")
    let existing = server.directory("guest").appendingPathComponent(folder)
    try write(["B.TXT": Data("theirs".utf8)], into: existing)
    try giveToGuest(existing)
    let source = try scratch.folder(
      "drop", ["a.txt": Data("a".utf8), "b.txt": Data("b".utf8), "c.txt": Data("c".utf8)])
    let destination = try server.destination("guest", folder)
    let failure = await #expect(throws: ForwardFailure.self) {
      try await Forwarder().forward(folder: source, to: destination, policy: .fail)
    }
    #expect(
      failure?.description == "“b.txt” already exists in the share “guest” on 127.0.0.1. "
        + "Choose Keep Both or Replace, or move the existing item.")
    #expect(try contents(of: existing) == ["a.txt": Data("a".utf8), "B.TXT": Data("theirs".utf8)])

    try FileManager.default.removeItem(at: existing.appendingPathComponent("B.TXT"))
    let report = try await Forwarder().forward(folder: source, to: destination, policy: .fail)
    #expect(
      try contents(of: existing) == [
        "a.txt": Data("a".utf8), "b.txt": Data("b".utf8), "c.txt": Data("c".utf8),
      ])
    #expect(report.resumedFiles == 1)
  }

  @Test func requiredEncryptionOverSMB3() async throws {
    let server = try TestSMBServer.fromEnvironment()
    let scratch = try Scratch()
    defer { scratch.remove() }
    let source = try scratch.folder("drop", ["secret.txt": Data("sealed".utf8)])
    let folder = uniqueName("sealed")
    let destination = try server.destination(
      "private", folder, credentials: Credentials(username: "dropper", password: "s3cret"),
      options: SMBOptions(minimumProtocol: .smb3, encryption: .required, timeout: .seconds(10)))
    _ = try await Forwarder().forward(folder: source, to: destination)
    let arrived = server.directory("private").appendingPathComponent(folder)
    #expect(try contents(of: arrived) == ["secret.txt": Data("sealed".utf8)])
  }

  @Test func cancelledDeliveryResumesExactlyOnce() async throws {
    let server = try TestSMBServer.fromEnvironment()
    let scratch = try Scratch()
    defer { scratch.remove() }
    let source = try scratch.folder("drop", sampleTree, emptyFolders: ["Leer"])
    let folder = uniqueName("cancel")
    let destination = try server.destination("guest", folder)
    await forwardCancelled(after: 2, folder: source, to: destination)
    let arrived = server.directory("guest").appendingPathComponent(folder)
    #expect(try contents(of: arrived).values.compactMap { $0 }.count == 2)
    let report = try await Forwarder().forward(folder: source, to: destination)
    #expect(try contents(of: arrived) == expectedSample())
    #expect(report.resumedFiles == 2)
  }
}

import BrowserDropTestSupport
import Foundation
import Testing

@testable import BrowserDropForwarding

struct LocalDestinationTests {
  @Test func deliversNestedUnicodeTreeAndRemovesTheSource() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let source = try scratch.folder("drop", sampleTree, emptyFolders: ["Leer"])
    let target = scratch.root.appendingPathComponent("inbox/nested")
    let report = try await Forwarder().forward(
      folder: source, to: LocalDestination(directory: target), verify: .sha256)
    #expect(try contents(of: target) == expectedSample())
    #expect(report.files.count == sampleTree.count)
    #expect(report.renames.isEmpty)
    #expect(report.resumedFiles == 0)
    #expect(!FileManager.default.fileExists(atPath: source.path))
  }

  @Test func streamReportsProgressThenTheReport() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let source = try scratch.folder("drop", sampleTree)
    let target = scratch.root.appendingPathComponent("inbox")
    var last: ForwardProgress?
    var report: ForwardReport?
    for try await event in Forwarder().deliver(
      folder: source, to: LocalDestination(directory: target))
    {
      switch event {
      case .progress(let progress): last = progress
      case .finished(let finished): report = finished
      }
    }
    let total = sampleTree.values.reduce(0) { $0 + Int64($1.count) }
    #expect(last?.completedFiles == sampleTree.count)
    #expect(last?.completedBytes == total)
    #expect(last?.totalBytes == total)
    #expect(report?.bytesSent == total)
  }

  @Test func renamePolicyKeepsBothAndMergesFolders() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let target = scratch.root.appendingPathComponent("inbox")
    try write(
      [
        "report.pdf": Data("old".utf8), "report 2.pdf": Data("old2".utf8),
        "Fotos/2024/a b#c.png": Data("old png".utf8), "Leer": Data("a file".utf8),
      ], into: target)
    let source = try scratch.folder(
      "drop",
      [
        "report.pdf": Data("new".utf8), "Fotos/2024/a b#c.png": Data("new png".utf8),
        "Leer/inside.txt": Data("in".utf8),
      ])
    let report = try await Forwarder().forward(
      folder: source, to: LocalDestination(directory: target))
    let found = try contents(of: target)
    #expect(found["report.pdf"] == Data("old".utf8))
    #expect(found["report 2.pdf"] == Data("old2".utf8))
    #expect(found["report 3.pdf"] == Data("new".utf8))
    #expect(found["Fotos/2024/a b#c 2.png"] == Data("new png".utf8))
    #expect(found["Leer"] == Data("a file".utf8))
    #expect(found["Leer 2/inside.txt"] == Data("in".utf8))
    #expect(
      Set(report.renames.map { "\($0.source) -> \($0.destination) \($0.reason)" }) == [
        "report.pdf -> report 3.pdf nameTaken",
        "Fotos/2024/a b#c.png -> Fotos/2024/a b#c 2.png nameTaken",
        "Leer -> Leer 2 kindConflict",
      ])
  }

  @Test func replacePolicyOverwritesFilesOnly() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let target = scratch.root.appendingPathComponent("inbox")
    try write(["report.pdf": Data("old".utf8), "keep.txt": Data("keep".utf8)], into: target)
    let source = try scratch.folder("drop", ["report.pdf": Data("new".utf8)])
    let report = try await Forwarder().forward(
      folder: source, to: LocalDestination(directory: target), policy: .replace)
    #expect(
      try contents(of: target) == ["report.pdf": Data("new".utf8), "keep.txt": Data("keep".utf8)])
    #expect(report.renames.isEmpty)
  }

  @Test func failPolicyStopsThenResumesExactlyOnce() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let target = scratch.root.appendingPathComponent("inbox")
    try write(["b.txt": Data("theirs".utf8)], into: target)
    let source = try scratch.folder(
      "drop", ["a.txt": Data("a".utf8), "b.txt": Data("b".utf8), "c.txt": Data("c".utf8)])
    let destination = LocalDestination(directory: target)
    let failure = await #expect(throws: ForwardFailure.self) {
      try await Forwarder().forward(folder: source, to: destination, policy: .fail)
    }
    #expect(failure?.kind == .nameTaken)
    #expect(
      failure?.description == "“b.txt” already exists in the folder \(target.path). "
        + "Choose Keep Both or Replace, or move the existing item.")
    #expect(try contents(of: target) == ["a.txt": Data("a".utf8), "b.txt": Data("theirs".utf8)])
    #expect(FileManager.default.fileExists(atPath: source.path))

    try FileManager.default.removeItem(at: target.appendingPathComponent("b.txt"))
    let report = try await Forwarder().forward(folder: source, to: destination, policy: .fail)
    #expect(
      try contents(of: target) == [
        "a.txt": Data("a".utf8), "b.txt": Data("b".utf8), "c.txt": Data("c".utf8),
      ])
    #expect(report.resumedFiles == 1)
    #expect(!FileManager.default.fileExists(atPath: source.path))
  }

  /// A stop part-way through removing a delivered folder leaves some files and the manifest (the
  /// manifest goes last): the next run sends nothing again and finishes the removal.
  @Test func aRemovalCutShortSendsNothingAgain() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let target = scratch.root.appendingPathComponent("inbox")
    try write(["c.txt": Data("theirs".utf8)], into: target)
    let source = try scratch.folder(
      "drop", ["a.txt": Data("a".utf8), "b.txt": Data("b".utf8), "c.txt": Data("c".utf8)])
    let destination = LocalDestination(directory: target)
    // a.txt and b.txt are delivered and recorded; the run stops at c.txt.
    await #expect(throws: ForwardFailure.self) {
      try await Forwarder().forward(folder: source, to: destination, policy: .fail)
    }
    // The state a cut-short removal leaves: b.txt and c.txt gone from the source, a.txt and the
    // manifest still there.
    try FileManager.default.removeItem(at: source.appendingPathComponent("b.txt"))
    try FileManager.default.removeItem(at: source.appendingPathComponent("c.txt"))
    let report = try await Forwarder().forward(folder: source, to: destination, policy: .rename)
    #expect(report.resumedFiles == 1)
    #expect(report.renames.isEmpty)
    #expect(
      try contents(of: target) == [
        "a.txt": Data("a".utf8), "b.txt": Data("b".utf8), "c.txt": Data("theirs".utf8),
      ])
    #expect(!FileManager.default.fileExists(atPath: source.path))
  }

  @Test func cancelledDeliveryResumesExactlyOnce() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let source = try scratch.folder("drop", sampleTree, emptyFolders: ["Leer"])
    let target = scratch.root.appendingPathComponent("inbox")
    let destination = LocalDestination(directory: target)
    await forwardCancelled(after: 2, folder: source, to: destination)
    #expect(try contents(of: target).values.compactMap { $0 }.count == 2)
    let report = try await Forwarder().forward(folder: source, to: destination)
    #expect(try contents(of: target) == expectedSample())
    #expect(report.resumedFiles == 2)
    #expect(report.renames.isEmpty)
  }
}

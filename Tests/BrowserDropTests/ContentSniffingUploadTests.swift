import BrowserDropTestSupport
import Foundation
import Testing

@testable import BrowserDrop

/// Real files uploaded to the real server on 127.0.0.1 under honest and dishonest names.
@Suite("Content sniffing through the real server")
struct ContentSniffingUploadTests {
  @Test func honestFilesPassWithTheirTypes() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    var generator = SeededGenerator(seed: 99)
    let uploads: [(path: String, bytes: [UInt8], mimeType: String, kind: ContentKind)] = [
      ("music/tone.wav", ContentFixtures.wav(), "audio/x-wav", .audio),
      ("music/song.mp3", ContentFixtures.mp3(id3: true), "audio/mpeg", .audio),
      ("pictures/dot.png", ContentFixtures.png(), "image/png", .image),
      ("papers/paper.pdf", ContentFixtures.pdf(), "application/pdf", .document),
      ("bundle.zip", ContentFixtures.zip(), "application/zip", .archive),
      ("notes.txt", ContentFixtures.utf8Text(), "text/plain", .text),
      ("tools/true", try ContentFixtures.elf(), "application/x-pie-executable", .other),
      ("tools/install.sh", ContentFixtures.shellScript(), "text/x-shellscript", .text),
      ("blob.bin", generator.bytes(300_000), "application/octet-stream", .other),
      // Unknown content contradicts nothing, whatever its name.
      ("noise.mp3", generator.bytes(70_000), "application/octet-stream", .other),
      ("empty.txt", [], "application/x-empty", .other),
      // Harmless content under a name that says something else is not disguised: it is stored,
      // and its type is what it really is.
      ("renamed/picture.mp3", ContentFixtures.png(), "image/png", .image),
      ("renamed/sound.pdf", ContentFixtures.wav(), "audio/x-wav", .audio),
      ("renamed/paper.txt", ContentFixtures.pdf(), "application/pdf", .document),
      ("renamed/bundle.jpg", ContentFixtures.zip(), "application/zip", .archive),
      ("renamed/prose.mp4", ContentFixtures.utf8Text(), "text/plain", .text),
      // 1.6 MB: sniffed while the rest of the body is spliced into the file.
      ("music/long.wav", ContentFixtures.wav(samples: 800_000), "audio/x-wav", .audio),
    ]
    for upload in uploads {
      let reply = try await session.upload(upload.path, upload.bytes)
      #expect(reply.status == 201, "\(upload.path): \(reply.text)")
    }
    // `.uploadFinished` carries the type and kind; so does the server's list.
    let events = try await session.log.wait { events in
      events.filter { if case .uploadFinished = $0 { true } else { false } }.count
        == uploads.count
    }
    let finished = events.compactMap {
      if case .uploadFinished(let file) = $0 { file } else { nil }
    }
    let received = await session.server.receivedFiles
    #expect(Set(finished) == Set(received))
    let byPath = Dictionary(uniqueKeysWithValues: finished.map { ($0.relativePath, $0) })
    let staged = session.stagedFiles()
    for upload in uploads {
      let file = try #require(byPath[upload.path], "\(upload.path)")
      if upload.path == "tools/true" {
        // The exact name depends on how /bin/true was linked on this machine.
        #expect(file.mimeType?.hasPrefix("application/x-") == true)
      } else {
        #expect(file.mimeType == upload.mimeType, "\(upload.path)")
      }
      #expect(file.kind == upload.kind, "\(upload.path)")
      #expect(staged[upload.path] == upload.bytes, "\(upload.path)")
    }
    #expect(staged.count == uploads.count)
  }

  @Test func disguisedExecutablesAreRefusedAndLeaveNothing() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let attempts: [(path: String, bytes: [UInt8], says: String)] = [
      ("music/song.mp3", try ContentFixtures.elf(), "This file is an ELF executable"),
      ("report.pdf", try ContentFixtures.elf(), "This file is an ELF executable"),
      ("notes.txt", ContentFixtures.shellScript(), "This file is a shell script (#!/bin/sh)"),
      ("photo.jpg", ContentFixtures.portableExecutable(), "This file is a Windows executable"),
      ("clip.mp4", ContentFixtures.machO(), "This file is a Mach-O executable"),
      ("cover.png", ContentFixtures.fatMachO(), "This file is a Mach-O universal binary"),
      // Still run by the kernel: odd ELF identification bytes, a first line past 256 bytes
      // whose interpreter path is whole; and names from the longer protected lists.
      ("book.aax", try Self.elfWithByte(4, setTo: 0), "This file is an ELF executable for "),
      ("lyrics.lrc", try Self.elfWithByte(6, setTo: 0), "This file is an ELF executable"),
      (
        "long.txt",
        ContentFixtures.ascii("#!/bin/sh" + String(repeating: " ", count: 300) + "\necho ran\n"),
        "This file is a shell script (#!/bin/sh)"
      ),
      ("playlist.m3u", ContentFixtures.shellScript(), "This file is a shell script"),
    ]
    for attempt in attempts {
      let reply = try await session.upload(attempt.path, attempt.bytes)
      #expect(reply.status == 400, "\(attempt.path)")
      #expect(reply.errorCode == "unsupported_type", "\(attempt.path)")
      let message = reply.json?["message"] as? String ?? ""
      #expect(message.hasPrefix(attempt.says), "\(attempt.path): \(message)")
      let shownExtension = ContentPolicy.fileExtension(of: attempt.path)
      #expect(message.hasSuffix("not a .\(shownExtension) file."), "\(message)")
    }
    #expect(session.stagedFiles().isEmpty)
    #expect(session.incomingEntries().isEmpty)
    #expect(await session.server.receivedFiles.isEmpty)
    let events = try await session.log.wait { events in
      events.filter { if case .uploadFailed = $0 { true } else { false } }.count == attempts.count
    }
    for event in events {
      if case .uploadFailed(_, let reason) = event {
        guard case .unsupportedType(let detail) = reason else {
          Issue.record("unexpected failure reason \(reason)")
          continue
        }
        #expect(detail.hasPrefix("This file is a"))
      }
    }
  }

  /// `/bin/true` with one identification byte changed: the kernel still runs it (it checks the
  /// magic, type and machine only).
  static func elfWithByte(_ index: Int, setTo value: UInt8) throws -> [UInt8] {
    var bytes = try ContentFixtures.elf()
    bytes[index] = value
    return bytes
  }

  /// The first 64 KiB are sniffed while the body streams in: a disguised executable is refused
  /// as soon as they are in, on the large-body (splice) path too, without waiting for the rest,
  /// and its partial file is already gone when the answer arrives.
  @Test func bigDisguisedExecutableIsRefusedWhileItStreams() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let declared = 256 * 1_024 * 1_024
    var start = try ContentFixtures.elf()
    start += [UInt8](repeating: 0x90, count: 2 * 1_024 * 1_024 - start.count)
    let client = try await session.client()
    try await client.send(
      Requests.uploadHead(port: session.port, encodedPath: "movies/holiday.mkv", length: declared))
    try await client.send(start)
    // 254 MiB of the body are never sent: the answer can only come from the first bytes.
    let reply = try await client.readReply()
    #expect(reply.status == 400)
    #expect(reply.errorCode == "unsupported_type")
    let message = reply.json?["message"] as? String ?? ""
    #expect(message.hasPrefix("This file is an ELF "), "\(message)")
    #expect(message.hasSuffix(", not a .mkv file."), "\(message)")
    #expect(session.incomingEntries().isEmpty)
    #expect(session.stagedFiles().isEmpty)
    let events = try await session.log.wait { events in
      events.contains { if case .uploadFailed = $0 { true } else { false } }
    }
    let reasons = events.compactMap {
      if case .uploadFailed(_, let reason) = $0 { reason } else { nil }
    }
    #expect(reasons == [.unsupportedType(message)])
  }

  /// A client that sends the whole body before it reads the answer (as plain HTTP libraries
  /// do). After an early refusal the server reads and drops the rest of the body, so the 400
  /// still reaches such a client instead of a reset connection (checked by mutation: without
  /// the discard this test fails with a broken pipe).
  @Test func disguisedExecutableSentWholeStillGetsItsAnswer() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    var body = try ContentFixtures.elf()
    body += [UInt8](repeating: 0x90, count: 24 * 1_024 * 1_024 - body.count)
    let client = try await session.client()
    try await client.send(
      Requests.uploadHead(port: session.port, encodedPath: "clip.mp4", length: body.count))
    try await client.send(body)
    let reply = try await client.readReply()
    #expect(reply.status == 400)
    #expect(reply.errorCode == "unsupported_type")
    #expect((reply.json?["message"] as? String)?.hasSuffix(", not a .mp4 file.") == true)
    #expect(session.stagedFiles().isEmpty)
    #expect(session.incomingEntries().isEmpty)
  }

  /// libmagic takes about 1% of random byte strings for DOS executables. Such bodies, bodies
  /// starting `MZ` or `#!/`, and random bodies past the sniffed prefix (one on the splice
  /// path) are all stored under media, document and text names.
  @Test func randomBodiesAreStoredThroughTheServer() async throws {
    // Durability off here (the other tests keep the default, on): the sniff then finishes the
    // spliced upload by itself, with no flush after the body.
    let session = try await TestSession.start { $0.durability = false }
    defer { Task { await session.stop() } }
    let sniffer = try #require(try await ContentInspector.load(policy: .rejectDisguised).sniffer)
    let bodies = await offTheCooperativePool { () -> (guessed: [[UInt8]], others: [[UInt8]]) in
      var generator = SeededGenerator(seed: 0xB0D1_E5)
      var guessed: [[UInt8]] = []
      for _ in 0..<20_000 where guessed.count < 24 {
        let body = generator.bytes(Int.random(in: 16...4_096, using: &generator))
        if sniffer.sniff(body).libmagicMimeType == "application/x-dosexec" { guessed.append(body) }
      }
      var others: [[UInt8]] = []
      for index in 0..<24 {
        var body = generator.bytes(Int.random(in: 64...8_192, using: &generator))
        body.replaceSubrange(
          0..<(index % 2 == 0 ? 2 : 3), with: index % 2 == 0 ? [0x4D, 0x5A] : [0x23, 0x21, 0x2F])
        others.append(body)
      }
      for _ in 0..<6 {
        others.append(generator.bytes(Int.random(in: 65_537...400_000, using: &generator)))
      }
      others.append(generator.bytes(1_024 * 1_024 + 65_536 + 5))
      return (guessed, others)
    }
    #expect(bodies.guessed.count == 24, "the weak guess this test guards against should occur")
    let names = ["mp3", "pdf", "txt", "jpg", "mp4", "docx"]
    var expected: [String: [UInt8]] = [:]
    for (index, body) in (bodies.guessed + bodies.others).enumerated() {
      let path = "random/\(index).\(names[index % names.count])"
      expected[path] = body
      let reply = try await session.upload(path, body)
      #expect(reply.status == 201, "\(path): \(reply.text)")
    }
    let received = await session.server.receivedFiles
    #expect(received.count == expected.count)
    let executableTypes = ["dosexec", "executable", "sharedlib", "mach-binary"]
    for file in received {
      let type = file.mimeType ?? "nil"
      #expect(!executableTypes.contains { type.contains($0) }, "\(file.relativePath): \(type)")
    }
    let guessedPaths = Set(bodies.guessed.indices.map { "random/\($0).\(names[$0 % names.count])" })
    for file in received where guessedPaths.contains(file.relativePath) {
      #expect(file.mimeType == "application/octet-stream", "\(file.relativePath)")
    }
    #expect(await session.log.failed.isEmpty)
    #expect(session.stagedFiles() == expected)
  }

  @Test func executablesUnderHonestNamesAreStored() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let uploads: [(String, [UInt8])] = [
      ("bin/true", try ContentFixtures.elf()),
      ("setup.exe", ContentFixtures.portableExecutable()),
      ("tool", ContentFixtures.machO()),
      ("run.sh", ContentFixtures.shellScript()),
      ("Tool.class", ContentFixtures.javaClass()),
    ]
    for (path, bytes) in uploads {
      #expect(try await session.upload(path, bytes).status == 201, "\(path)")
    }
    #expect(session.stagedFiles().count == uploads.count)
  }

  @Test func strictPolicyAcceptsOnlyMatchingTypes() async throws {
    let session = try await TestSession.start {
      $0.contentPolicy = .strict(allowedTypes: ["audio/*", "application/pdf"])
    }
    defer { Task { await session.stop() } }
    #expect(try await session.upload("tone.wav", ContentFixtures.wav()).status == 201)
    #expect(try await session.upload("paper.pdf", ContentFixtures.pdf()).status == 201)
    let png = try await session.upload("dot.png", ContentFixtures.png())
    #expect(png.status == 400)
    #expect(png.errorCode == "unsupported_type")
    #expect(
      png.json?["message"] as? String
        == "This file is image/png, and this session accepts only audio/*, application/pdf.")
    // Past the sniffed prefix, on the splice path: the same verdict while the body streams.
    let bigPNG = ContentFixtures.png() + [UInt8](repeating: 0, count: 3 * 1_024 * 1_024)
    let big = try await session.upload("big.png", bigPNG)
    #expect(big.status == 400)
    #expect(big.errorCode == "unsupported_type")
    let longWAV = ContentFixtures.wav(samples: 800_000)
    #expect(try await session.upload("long.wav", longWAV).status == 201)
    #expect(session.stagedFiles().keys.sorted() == ["long.wav", "paper.pdf", "tone.wav"])
    #expect(session.incomingEntries().isEmpty)
  }

  @Test func offPolicyStoresEverythingUnsniffed() async throws {
    let session = try await TestSession.start { $0.contentPolicy = .off }
    defer { Task { await session.stop() } }
    #expect(try await session.upload("song.mp3", try ContentFixtures.elf()).status == 201)
    var big = try ContentFixtures.elf()
    big += [UInt8](repeating: 0x90, count: 2 * 1_024 * 1_024)
    #expect(try await session.upload("movie.mkv", big).status == 201)
    let received = await session.server.receivedFiles
    #expect(received.count == 2)
    #expect(received.allSatisfy { $0.mimeType == nil && $0.kind == .other })
    #expect(session.stagedFiles()["movie.mkv"] == big)
  }
}

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
    ]
    for upload in uploads {
      let reply = try await session.upload(upload.path, upload.bytes)
      #expect(reply.status == 201, "\(upload.path): \(reply.text)")
    }
    let received = await session.server.receivedFiles
    let byPath = Dictionary(uniqueKeysWithValues: received.map { ($0.relativePath, $0) })
    for upload in uploads {
      let file = try #require(byPath[upload.path], "\(upload.path)")
      if upload.path == "tools/true" {
        // The exact name depends on how /bin/true was linked on this machine.
        #expect(file.mimeType?.hasPrefix("application/x-") == true)
      } else {
        #expect(file.mimeType == upload.mimeType, "\(upload.path)")
      }
      #expect(file.kind == upload.kind, "\(upload.path)")
    }
    #expect(session.stagedFiles().count == uploads.count)
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

  @Test func bigDisguisedExecutableIsRefusedAfterItsBody() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    // 8 MiB: only the first 64 KiB are sniffed, the rest streams to the partial file first.
    var body = try ContentFixtures.elf()
    body += [UInt8](repeating: 0x90, count: 8 * 1_024 * 1_024 - body.count)
    let reply = try await session.upload("movies/holiday.mkv", body)
    #expect(reply.status == 400)
    #expect(reply.errorCode == "unsupported_type")
    #expect(session.stagedFiles().isEmpty)
    #expect(session.incomingEntries().isEmpty)
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
    #expect(session.stagedFiles().keys.sorted() == ["paper.pdf", "tone.wav"])
    #expect(session.incomingEntries().isEmpty)
  }

  @Test func offPolicyStoresEverythingUnsniffed() async throws {
    let session = try await TestSession.start { $0.contentPolicy = .off }
    defer { Task { await session.stop() } }
    #expect(try await session.upload("song.mp3", try ContentFixtures.elf()).status == 201)
    let received = await session.server.receivedFiles
    #expect(received.count == 1)
    #expect(received.first?.mimeType == nil)
    #expect(received.first?.kind == .other)
  }
}

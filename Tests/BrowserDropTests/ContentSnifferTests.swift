import BrowserDropSystem
import Foundation
import Glibc
import Synchronization
import Testing

@testable import BrowserDrop

/// One sniffer for the whole suite, as in the server.
private let sharedSniffer = Result { () throws(BrowserDropError) in try ContentSniffer() }

struct ContentSnifferTests {
  let sniffer: ContentSniffer

  init() throws {
    sniffer = try sharedSniffer.get()
  }

  // MARK: Real files

  @Test func wavIsAudio() {
    let result = sniffer.sniff(ContentFixtures.wav())
    #expect(result.mimeType == "audio/x-wav")
    #expect(result.kind == .audio)
    #expect(result.charset == nil)
    #expect(result.executable == nil)
  }

  @Test func mp3IsAudioMPEG() {
    for id3 in [false, true] {
      let result = sniffer.sniff(ContentFixtures.mp3(id3: id3))
      #expect(result.mimeType == "audio/mpeg", "ID3: \(id3)")
      #expect(result.kind == .audio)
      #expect(result.executable == nil)
    }
  }

  @Test func pngIsAnImage() {
    let result = sniffer.sniff(ContentFixtures.png())
    #expect(result.mimeType == "image/png")
    #expect(result.kind == .image)
    #expect(result.executable == nil)
  }

  @Test func pdfIsADocument() {
    let result = sniffer.sniff(ContentFixtures.pdf())
    #expect(result.mimeType == "application/pdf")
    #expect(result.kind == .document)
  }

  @Test func zipAndGzipAreArchives() {
    let zip = sniffer.sniff(ContentFixtures.zip())
    #expect(zip.mimeType == "application/zip")
    #expect(zip.kind == .archive)
    let gzip = sniffer.sniff(ContentFixtures.gzip())
    #expect(gzip.mimeType == "application/gzip")
    #expect(gzip.kind == .archive)
  }

  @Test func utf8TextIsText() {
    let result = sniffer.sniff(ContentFixtures.utf8Text())
    #expect(result.mimeType == "text/plain")
    #expect(result.charset == "utf-8")
    #expect(result.kind == .text)
    #expect(result.executable == nil)
    let ascii = sniffer.sniff(ContentFixtures.asciiText())
    #expect(ascii.mimeType == "text/plain")
    #expect(ascii.charset == "us-ascii")
  }

  @Test func jsonIsText() {
    let result = sniffer.sniff(ContentFixtures.json())
    #expect(result.mimeType == "application/json")
    #expect(result.kind == .text)
  }

  @Test func emptyAndUnknownContentAreUnknown() {
    let empty = sniffer.sniff([UInt8]())
    #expect(empty.mimeType == "application/x-empty")
    #expect(empty.isUnknown)
    #expect(empty.kind == .other)
    #expect(empty.executable == nil)

    var generator = SeededGenerator(seed: 7)
    let noise = sniffer.sniff(generator.bytes(65_536))
    #expect(noise.mimeType == "application/octet-stream")
    #expect(noise.isUnknown)
    #expect(noise.kind == .other)
  }

  @Test func elfFromBinTrueIsAnExecutable() throws {
    let result = sniffer.sniff(try ContentFixtures.elf())
    #expect(result.libmagicMimeType.hasPrefix("application/x-"))
    #expect(result.mimeType == result.libmagicMimeType)
    #expect(result.kind == .other)
    let executable = try #require(result.executable)
    #expect(executable.hasPrefix("ELF executable"))
    #if arch(x86_64)
      #expect(executable == "ELF executable for x86-64")
    #elseif arch(arm64)
      #expect(executable == "ELF executable for ARM64")
    #endif
  }

  /// The kernel runs an ELF file whatever its class, byte order and version bytes say (it reads
  /// the type and machine in its own layout), so odd ones never make an executable harmless.
  @Test func elfWithOddIdentificationBytesIsStillAnExecutable() throws {
    #if arch(x86_64)
      let machine = "x86-64"
    #elseif arch(arm64)
      let machine = "ARM64"
    #endif
    for (index, value) in [(4, 0), (4, 9), (5, 0), (5, 7)] as [(Int, UInt8)] {
      var bytes = try ContentFixtures.elf()
      bytes[index] = value
      let result = sniffer.sniff(bytes)
      #expect(
        result.executable == "ELF executable for \(machine) (with a malformed header)",
        "byte \(index) = \(value)")
      #expect(
        ContentPolicy.rejectDisguised.refusal(for: result, fileName: "book.aax") != nil,
        "byte \(index) = \(value)")
    }
    var version = try ContentFixtures.elf()
    version[6] = 0
    #expect(sniffer.sniff(version).executable == "ELF executable for \(machine)")
    // Nothing but the magic and an odd class: still an ELF binary.
    #expect(
      [UInt8]([0x7F, 0x45, 0x4C, 0x46, 9, 1, 1, 0]).withUnsafeBytes(ExecutableSignature.describe)
        == "ELF binary (with a malformed header)")
  }

  @Test func protectedExtensionsCoverAudiobooksPlaylistsAndSubtitles() throws {
    let elf = sniffer.sniff(try ContentFixtures.elf())
    for name in [
      "book.aax", "book.aa", "a.mp2", "a.mpga", "ring.m4r", "a.au", "a.dsf", "a.asf", "a.jp2",
      "a.tga", "list.m3u", "list.m3u8", "a.lrc", "a.cue", "a.ass", "a.cbz", "a.xcf",
    ] {
      #expect(
        ContentPolicy.rejectDisguised.refusal(for: elf, fileName: name) != nil, "\(name)")
    }
    // `.ts` is TypeScript source as often as video: it promises nothing.
    #expect(ContentPolicy.rejectDisguised.refusal(for: elf, fileName: "main.ts") == nil)
  }

  @Test func shellScriptIsAScript() {
    let result = sniffer.sniff(ContentFixtures.shellScript())
    #expect(result.mimeType == "text/x-shellscript")
    #expect(result.kind == .text)
    #expect(result.executable == "shell script (#!/bin/sh)")

    let python = sniffer.sniff(ContentFixtures.pythonScript())
    #expect(python.executable == "Python script (#!/usr/bin/env python3)")
  }

  @Test func portableExecutableIsAnExecutable() {
    let result = sniffer.sniff(ContentFixtures.portableExecutable())
    #expect(
      ["application/vnd.microsoft.portable-executable", "application/x-dosexec"].contains(
        result.mimeType))
    #expect(result.executable == "Windows executable (PE) for x86-64")
    let dll = sniffer.sniff(ContentFixtures.portableExecutable(dll: true))
    #expect(dll.executable == "Windows DLL (PE) for x86-64")
  }

  @Test func machOIsAnExecutable() {
    let thin = sniffer.sniff(ContentFixtures.machO())
    #expect(thin.mimeType == "application/x-mach-binary")
    #expect(thin.executable == "Mach-O executable for x86-64")
    #expect(
      sniffer.sniff(ContentFixtures.machO(arm: true)).executable
        == "Mach-O executable for ARM64")
    let fat = sniffer.sniff(ContentFixtures.fatMachO())
    #expect(fat.mimeType == "application/x-mach-binary")
    #expect(fat.executable == "Mach-O universal binary")
  }

  @Test func javaClassIsNotTakenForMachO() {
    let result = sniffer.sniff(ContentFixtures.javaClass())
    #expect(result.mimeType == "application/x-java-applet")
    #expect(result.executable == nil)
  }

  @Test func sniffReadsAFilePrefix() throws {
    let url = FileManager.default.temporaryDirectory
      .appending(path: "sniff-\(UUID().uuidString).png")
    defer { try? FileManager.default.removeItem(at: url) }
    // A PNG followed by 200 KiB of padding: only the first 64 KiB are read.
    try Data(ContentFixtures.png() + [UInt8](repeating: 0, count: 200 * 1_024)).write(to: url)
    #expect(try sniffer.sniff(contentsOf: url).mimeType == "image/png")
  }

  // MARK: Executable signatures

  @Test func weakExecutableShapesAreNotExecutables() {
    func describe(_ bytes: [UInt8]) -> String? {
      bytes.withUnsafeBytes { ExecutableSignature.describe($0) }
    }
    let pe = ContentFixtures.portableExecutable()
    // MZ alone, or e_lfanew pointing outside the prefix or at something else.
    #expect(describe(Array(pe.prefix(0x80))) == nil)
    #expect(describe(ContentFixtures.ascii("MZ") + [UInt8](repeating: 0, count: 100)) == nil)
    var misplaced = pe
    misplaced[0x3C] = 0x84
    #expect(describe(misplaced) == nil)
    // Mach-O magic with an unknown CPU type.
    #expect(describe([0xCF, 0xFA, 0xED, 0xFE, 0x42, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0]) == nil)
    // `#!` without an absolute interpreter, with binary garbage, or with no end of line.
    #expect(describe(ContentFixtures.ascii("#!bash\necho\n")) == nil)
    #expect(describe(ContentFixtures.ascii("#! \n")) == nil)
    #expect(describe(ContentFixtures.ascii("#!/5\n")) == nil)
    #expect(describe(ContentFixtures.ascii("#!/usr//sh\n")) == nil)
    #expect(describe(ContentFixtures.ascii("#!/bin/\n")) == nil)
    #expect(describe([0x23, 0x21, 0x2F, 0x62, 0x00, 0x0A]) == nil)
    #expect(describe(ContentFixtures.ascii("#!/bin/" + String(repeating: "x", count: 300))) == nil)
    // A first line past 256 bytes whose interpreter path is cut off by the limit is not one the
    // kernel runs (checked above); one whose path ends inside it is, whatever follows.
    #expect(
      describe(ContentFixtures.ascii("#!/bin/sh" + String(repeating: " ", count: 300) + "\nx\n"))
        == "shell script (#!/bin/sh)")
    #expect(
      describe(ContentFixtures.ascii("#!/bin/sh -e" + String(repeating: " ", count: 300) + "x"))
        == "shell script (#!/bin/sh -e)")
    #expect(
      describe(ContentFixtures.ascii("#!/usr/bin/env -S python3 -c 'print(\"é\")'\n"))
        == "Python script (#!/usr/bin/env -S python3 -c 'print(\"é\")')")
    // The kernel reads the line as a C string: a NUL ends it like a LF, whatever follows.
    #expect(
      describe(ContentFixtures.ascii("#!/bin/sh") + [0, 0xFF, 0xFE, 0x01, 0x0A])
        == "shell script (#!/bin/sh)")
    // …but a one-line script that is the whole file, and `#! /bin/sh` with a blank, are scripts.
    #expect(describe(ContentFixtures.ascii("#!/bin/sh")) == "shell script (#!/bin/sh)")
    #expect(
      describe(ContentFixtures.ascii("#! /bin/bash -e\nls\n")) == "shell script (#!/bin/bash -e)")
  }

  @Test func bigEndianMachOIsRecognised() {
    let header: [UInt8] =
      [0xFE, 0xED, 0xFA, 0xCE] + ContentFixtures.be(UInt32(18)) + ContentFixtures.be(UInt32(0))
      + ContentFixtures.be(UInt32(6)) + [UInt8](repeating: 0, count: 12)
    #expect(
      header.withUnsafeBytes { ExecutableSignature.describe($0) }
        == "Mach-O dynamic library for PowerPC")
  }

  // MARK: Policy

  private static let protectedNames = ["song.mp3", "report.pdf", "notes.txt", "photo.JPG"]

  @Test func disguisedExecutablesAreRefused() throws {
    let executables: [(name: String, bytes: [UInt8], says: String)] = [
      ("ELF", try ContentFixtures.elf(), "an ELF executable"),
      ("PE", ContentFixtures.portableExecutable(), "a Windows executable (PE)"),
      ("Mach-O", ContentFixtures.machO(), "a Mach-O executable"),
      ("fat Mach-O", ContentFixtures.fatMachO(), "a Mach-O universal binary"),
      ("script", ContentFixtures.shellScript(), "a shell script (#!/bin/sh)"),
    ]
    for executable in executables {
      let sniffed = sniffer.sniff(executable.bytes)
      for name in Self.protectedNames {
        let refusal = ContentPolicy.rejectDisguised.refusal(for: sniffed, fileName: name)
        let message = try #require(refusal?.message, "\(executable.name) as \(name)")
        #expect(message.hasPrefix("This file is \(executable.says)"), "\(message)")
        let shownExtension = ContentPolicy.fileExtension(of: name)
        #expect(message.hasSuffix(", not a .\(shownExtension) file."), "\(message)")
      }
    }
    let elf = sniffer.sniff(try ContentFixtures.elf())
    #expect(
      ContentPolicy.rejectDisguised.refusal(for: elf, fileName: "music/song.mp3")?.message
        == "This file is an \(elf.executable!), not a .mp3 file.")
  }

  @Test func executablesUnderHonestNamesAreAccepted() throws {
    let honest: [([UInt8], [String])] = [
      (try ContentFixtures.elf(), ["true", "true.bin", "a.out", "tool.so", "build/true"]),
      (ContentFixtures.portableExecutable(), ["setup.exe", "plugin.dll", "setup"]),
      (ContentFixtures.machO(), ["tool", "tool.dylib", "Tool.app.zip"]),
      (ContentFixtures.shellScript(), ["install.sh", "install", "run.command"]),
      (ContentFixtures.pythonScript(), ["tool.py"]),
    ]
    for (bytes, names) in honest {
      let sniffed = sniffer.sniff(bytes)
      #expect(sniffed.executable != nil)
      for name in names {
        #expect(
          ContentPolicy.rejectDisguised.refusal(for: sniffed, fileName: name) == nil, "\(name)")
      }
    }
  }

  @Test func honestFilesAreAcceptedUnderAnyName() throws {
    let files: [[UInt8]] = [
      ContentFixtures.wav(), ContentFixtures.png(), ContentFixtures.pdf(), ContentFixtures.zip(),
      ContentFixtures.utf8Text(), ContentFixtures.json(), ContentFixtures.javaClass(), [],
    ]
    let names = ["sound.wav", "image.png", "paper.pdf", "a.zip", "x.txt", "song.mp3", "noext"]
    for bytes in files {
      let sniffed = sniffer.sniff(bytes)
      for name in names {
        #expect(ContentPolicy.rejectDisguised.refusal(for: sniffed, fileName: name) == nil)
      }
    }
  }

  @Test func offAcceptsEverything() throws {
    let sniffed = sniffer.sniff(try ContentFixtures.elf())
    #expect(ContentPolicy.off.refusal(for: sniffed, fileName: "song.mp3") == nil)
    #expect(!ContentPolicy.off.sniffsContent)
    #expect(ContentPolicy.rejectDisguised.sniffsContent)
    #expect(ContentPolicy.strict(allowedTypes: []).sniffsContent)
  }

  @Test func extensionsAreReadFromNamesAndPaths() {
    #expect(ContentPolicy.fileExtension(of: "Song.MP3") == "mp3")
    #expect(ContentPolicy.fileExtension(of: "album/disc 1/track.flac") == "flac")
    #expect(ContentPolicy.fileExtension(of: "archive.tar.gz") == "gz")
    #expect(ContentPolicy.fileExtension(of: "README") == "")
    #expect(ContentPolicy.fileExtension(of: ".profile") == "")
    #expect(ContentPolicy.fileExtension(of: "dir.v2/README") == "")
    let sniffed = sniffer.sniff(ContentFixtures.shellScript())
    #expect(ContentPolicy.rejectDisguised.refusal(for: sniffed, fileExtension: ".TXT") != nil)
    #expect(ContentPolicy.rejectDisguised.refusal(for: sniffed, fileExtension: "txt") != nil)
    #expect(ContentPolicy.rejectDisguised.refusal(for: sniffed, fileExtension: "") == nil)
  }

  @Test func strictPatterns() throws {
    let wav = sniffer.sniff(ContentFixtures.wav())
    let png = sniffer.sniff(ContentFixtures.png())
    let pdf = sniffer.sniff(ContentFixtures.pdf())
    let text = sniffer.sniff(ContentFixtures.utf8Text())
    let empty = sniffer.sniff([UInt8]())

    let audio = ContentPolicy.strict(allowedTypes: ["audio/*"])
    #expect(audio.refusal(for: wav, fileName: "a.wav") == nil)
    #expect(
      audio.refusal(for: png, fileName: "a.png")?.message
        == "This file is image/png, and this session accepts only audio/*.")
    #expect(
      audio.refusal(for: empty, fileName: "a.wav")?.message
        == "This file is empty, and this session accepts only audio/*.")

    let mixed = ContentPolicy.strict(allowedTypes: [" AUDIO/* ", "Application/PDF"])
    #expect(mixed.refusal(for: wav, fileName: "a.wav") == nil)
    #expect(mixed.refusal(for: pdf, fileName: "a.pdf") == nil)
    #expect(mixed.refusal(for: text, fileName: "a.txt") != nil)

    let parameters = ContentPolicy.strict(allowedTypes: ["text/plain; charset=utf-8"])
    #expect(parameters.refusal(for: text, fileName: "a.txt") == nil)

    let any = ContentPolicy.strict(allowedTypes: ["*/*"])
    for sniffed in [wav, png, pdf, text, empty] {
      #expect(any.refusal(for: sniffed, fileName: "file.bin") == nil)
    }
    // Strict keeps the disguise rule: a script is text/*, but not under a .txt name.
    let script = sniffer.sniff(ContentFixtures.shellScript())
    let textOnly = ContentPolicy.strict(allowedTypes: ["text/*"])
    #expect(textOnly.refusal(for: script, fileName: "run.sh") == nil)
    #expect(textOnly.refusal(for: script, fileName: "notes.txt") != nil)

    #expect(ContentPolicy.strict(allowedTypes: []).refusal(for: wav, fileName: "a.wav") != nil)
    #expect(!ContentPolicy.matches("audio/x-wav", pattern: "audio"))
    #expect(!ContentPolicy.matches("audiobook/x", pattern: "audio/*"))
    #expect(ContentPolicy.matches("video/mp4", pattern: "*"))
  }

  @Test func kindsOfMIMETypes() {
    let expectations: [String: ContentKind] = [
      "audio/mpeg": .audio, "application/ogg": .audio, "video/mp4": .video,
      "image/svg+xml": .image, "application/pdf": .document, "text/rtf": .document,
      "application/vnd.openxmlformats-officedocument.wordprocessingml.document": .document,
      "application/vnd.oasis.opendocument.text": .document, "application/epub+zip": .document,
      "text/html": .text, "application/json": .text, "application/xml": .text,
      "application/zip": .archive, "application/x-7z-compressed": .archive,
      "application/x-xz": .archive, "application/zstd": .archive, "application/x-tar": .archive,
      "application/x-pie-executable": .other, "application/octet-stream": .other,
    ]
    for (type, kind) in expectations {
      #expect(ContentKind(mimeType: type) == kind, "\(type)")
    }
  }

  // MARK: Random bodies

  /// libmagic calls about 1% of random byte strings a DOS executable from their first byte;
  /// none of them may be refused, and none is reported as an executable. Each verdict comes from
  /// the server's own decision under the default policy (`ContentInspector.finding`, what every
  /// upload goes through).
  @Test func randomBodiesAreNeverRefused() async {
    let sniffer = self.sniffer
    let inspector = ContentInspector(policy: .rejectDisguised, sniffer: sniffer)
    let count = 6_000
    let tally = await offTheCooperativePool { () -> RandomBodyTally in
      var generator = SeededGenerator(seed: 0x5EED_B0D1)
      var tally = RandomBodyTally()
      for index in 0..<count {
        let length: Int
        switch index % 10 {
        case 0..<5: length = Int.random(in: 0...512, using: &generator)
        case 5..<8: length = Int.random(in: 513...8_192, using: &generator)
        default: length = Int.random(in: 8_193...65_536, using: &generator)
        }
        var body = generator.bytes(length)
        // Every tenth body starts like a DOS header, every tenth like a script line.
        if index % 10 == 3, body.count >= 2 { body.replaceSubrange(0..<2, with: [0x4D, 0x5A]) }
        if index % 10 == 7, body.count >= 3 {
          body.replaceSubrange(0..<3, with: [0x23, 0x21, 0x2F])
        }
        let sniffed = sniffer.sniff(body)
        if sniffed.libmagicMimeType == "application/x-dosexec" {
          switch index % 10 {
          case 3: tally.dosexecMZ += 1
          case 7: tally.dosexecScript += 1
          default: tally.dosexecPlain += 1
          }
        }
        if sniffed.libmagicMimeType != sniffed.mimeType { tally.discardedGuesses += 1 }
        if let executable = sniffed.executable {
          tally.executables.append("body \(index): \(executable)")
        }
        for fileExtension in ["mp3", "pdf", "txt", "jpg", "docx", ""] {
          let finding = inspector.finding(for: sniffed, fileExtension: fileExtension)
          if let refusal = finding.refusal {
            tally.refused.append("body \(index) as .\(fileExtension): \(refusal)")
          }
        }
      }
      return tally
    }
    #expect(tally.executables.isEmpty, "\(tally.executables.prefix(5))")
    #expect(tally.refused.isEmpty, "\(tally.refused.prefix(5))")
    // Recorded for docs/content-sniffing.md.
    print(
      "random bodies: \(count) (\(count / 10) starting MZ, \(count / 10) starting #!/); "
        + "libmagic said application/x-dosexec for \(tally.dosexecPlain) plain, "
        + "\(tally.dosexecMZ) MZ, \(tally.dosexecScript) #!/ bodies; executable guesses "
        + "discarded: \(tally.discardedGuesses); refused: \(tally.refused.count)")
    #expect(tally.dosexecPlain > 0, "the weak guess this test guards against should occur")
  }

  /// The decision the random bodies above go through is the one an upload's prefix gets.
  @Test func inspectorDecidesFromTheSniffedPrefix() throws {
    let inspector = ContentInspector(policy: .rejectDisguised, sniffer: sniffer)
    let elf = try ContentFixtures.elf()
    let found = elf.withUnsafeBytes { inspector.finding(forPrefix: $0, fileExtension: "mp3") }
    #expect(found == inspector.finding(for: sniffer.sniff(elf), fileExtension: "mp3"))
    #expect(found.refusal?.hasPrefix("This file is an ELF ") == true)
    #expect(found.kind == .other && found.mimeType?.hasPrefix("application/x-") == true)
    let png = ContentFixtures.png()
    let image = png.withUnsafeBytes { inspector.finding(forPrefix: $0, fileExtension: "mp3") }
    #expect(image == ContentInspector.Finding(mimeType: "image/png", kind: .image, refusal: nil))
    let off = ContentInspector(policy: .off, sniffer: sniffer)
    #expect(!off.sniffs)
    #expect(
      elf.withUnsafeBytes { off.finding(forPrefix: $0, fileExtension: "mp3") }
        == ContentInspector.Finding(mimeType: nil, kind: .other, refusal: nil))
  }

  private struct RandomBodyTally: Sendable {
    var dosexecPlain = 0
    var dosexecMZ = 0
    var dosexecScript = 0
    var discardedGuesses = 0
    var executables: [String] = []
    var refused: [String] = []
  }

  // MARK: Errors

  /// Every handle reads one mapping of the compiled database: `magic_load` would map it once
  /// per handle, and the resident set would count each mapping's pages.
  @Test func handlesShareOneMappingOfTheDatabase() throws {
    let system = try #require(
      MappedDatabase.compiledDatabase(in: "/etc/magic:/usr/share/misc/magic"))
    let directory = try Self.makeScratchFolder()
    defer { try? FileManager.default.removeItem(at: directory) }
    let copy = directory.appending(path: "copy.mgc")
    try Data(contentsOf: URL(fileURLWithPath: system)).write(to: copy)

    let sniffer = try ContentSniffer(databasePath: copy.path, handleCount: 3)
    // The kernel writes /proc/self/maps a page at a time and the other tests of the run map and
    // unmap memory between those reads, so one reading can miss a line (seen once in a full
    // parallel run: no line for this file). A mapping per handle would show in every reading:
    // none may show more than one, and one of a few readings must show exactly one.
    var counts: [Int] = []
    for _ in 0..<3 {
      counts.append(try Self.mappings(of: copy.path))
      if counts.last == 1 { break }
    }
    #expect(counts.allSatisfy { $0 <= 1 } && counts.last == 1, "mappings per reading: \(counts)")
    #expect(sniffer.sniff(ContentFixtures.png()).mimeType == "image/png")
  }

  /// How many lines of /proc/self/maps map the file at `path`, told by its device and inode
  /// rather than by the name the kernel prints.
  private static func mappings(of path: String) throws -> Int {
    var info = stat()
    try #require(stat(path, &info) == 0)
    // The kernel's encoding of dev_t: 12 bits of major and 20 of minor, split across the word.
    let device = UInt64(info.st_dev)
    let major = ((device >> 8) & 0xfff) | ((device >> 32) & ~0xfff)
    let minor = (device & 0xff) | ((device >> 12) & ~0xff)
    let wanted =
      String(major, radix: 16, uppercase: false).leftPadded(to: 2) + ":"
      + String(minor, radix: 16, uppercase: false).leftPadded(to: 2)
    let maps = try String(contentsOfFile: "/proc/self/maps", encoding: .utf8)
    return maps.split(separator: "\n").count(where: { line in
      // address perms offset dev inode [path]
      let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
      return fields.count >= 5 && fields[3] == wanted && fields[4] == "\(info.st_ino)"
    })
  }

  /// A session keeps every file's MIME type: equal types share one buffer, and the set of
  /// shared strings stays bounded whatever the uploads.
  @Test func mimeTypesAreSharedCopies() {
    func address(_ string: String) -> UnsafeRawPointer? {
      string.utf8.withContiguousStorageIfAvailable { UnsafeRawPointer($0.baseAddress) } ?? nil
    }
    let interned = InternedStrings(capacity: 2)
    let first = interned.intern(String(repeating: "application/octet-stream", count: 1))
    let second = interned.intern(["application/", "octet-stream"].joined())
    #expect(first == second && address(first) != nil && address(first) == address(second))
    _ = interned.intern("application/x-something-long")
    let third = ["application/", "x-yet-another-type"].joined()
    let past = interned.intern(third)
    #expect(past == third && address(past) == address(third))
    #expect(
      address(interned.intern(["application/", "x-yet-another-type"].joined())) != address(third))
  }

  @Test func theCompiledDatabaseIsFoundInLibmagicsPathList() throws {
    let directory = try Self.makeScratchFolder()
    defer { try? FileManager.default.removeItem(at: directory) }
    let comments = directory.appending(path: "local")
    try Data("# local magic\n\n  # nothing yet\n".utf8).write(to: comments)
    let definitions = directory.appending(path: "defs")
    try Data("0 string BDTEST BrowserDrop test\n".utf8).write(to: definitions)
    let compiled = directory.appending(path: "db.mgc")
    try Data([1, 2, 3]).write(to: compiled)
    let plain = directory.appending(path: "db").path

    #expect(MappedDatabase.compiledDatabase(in: "\(comments.path):\(plain)") == compiled.path)
    #expect(MappedDatabase.compiledDatabase(in: compiled.path) == compiled.path)
    #expect(
      MappedDatabase.compiledDatabase(in: "\(directory.path)/missing:\(plain)") == compiled.path)
    // Definitions of its own, or two databases: libmagic loads them itself.
    #expect(MappedDatabase.compiledDatabase(in: "\(definitions.path):\(plain)") == nil)
    #expect(MappedDatabase.compiledDatabase(in: "\(compiled.path):\(plain)") == nil)
    #expect(MappedDatabase.compiledDatabase(in: "\(directory.path)/none") == nil)
  }

  /// A new empty folder in the temporary directory, for databases made by a test.
  private static func makeScratchFolder() throws -> URL {
    let directory = FileManager.default.temporaryDirectory
      .appending(path: "magic-\(UUID().uuidString)", directoryHint: .isDirectory)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    return directory
  }

  @Test func missingDatabaseIsOneClearError() {
    #expect {
      _ = try ContentSniffer(databasePath: "/nonexistent/browserdrop/magic.mgc")
    } throws: { error in
      guard case .contentDatabaseUnavailable(let reason) = error as? BrowserDropError else {
        return false
      }
      let description = (error as? BrowserDropError)?.description ?? ""
      return reason.contains("/nonexistent/browserdrop/magic")
        && description.hasPrefix("Can't load the file-type database (libmagic):")
    }
  }

  @Test func brokenDatabaseIsOneClearError() throws {
    let directory = try Self.makeScratchFolder()
    defer { try? FileManager.default.removeItem(at: directory) }

    // A compiled database of a version this libmagic cannot read.
    let garbage = directory.appending(path: "future.mgc")
    let header = ContentFixtures.le(UInt32(0xF11E_041C)) + ContentFixtures.le(UInt32(99))
    try Data(header + [UInt8](repeating: 0, count: 4_088)).write(to: garbage)
    #expect {
      _ = try ContentSniffer(databasePath: garbage.path)
    } throws: { error in
      guard case .contentDatabaseUnavailable(let reason) = error as? BrowserDropError else {
        return false
      }
      return reason.contains("future.mgc") && reason.contains("version")
    }

    // A database that loads but knows nothing.
    let empty = directory.appending(path: "empty")
    try Data("# no entries\n".utf8).write(to: empty)
    #expect {
      _ = try ContentSniffer(databasePath: empty.path)
    } throws: { error in
      guard case .contentDatabaseUnavailable(let reason) = error as? BrowserDropError else {
        return false
      }
      return reason.contains("does not recognise a PNG")
    }
  }

  /// Every session of the process shares one sniffer: the database is loaded once.
  @Test func theDatabaseIsLoadedOncePerProcess() async throws {
    let first = try await ContentInspector.load(policy: .rejectDisguised)
    let second = try await ContentInspector.load(policy: .strict(allowedTypes: ["audio/*"]))
    let firstSniffer = try #require(first.sniffer)
    #expect(second.sniffer === firstSniffer)
    #expect(try await ContentInspector.load(policy: .off).sniffer == nil)
  }

  @Test func theDefaultPolicyRejectsDisguisedFiles() {
    #expect(BrowserDropServer.Configuration().contentPolicy == .rejectDisguised)
  }

  /// `ContentInspector.inspect` asserts that it runs on the blocking pool; the check itself.
  @Test func theBlockingPoolKnowsItsThreads() async {
    #expect(await BlockingPool.shared.run { BlockingPool.shared.runsCurrentThread })
    #expect(!BlockingPool.shared.runsCurrentThread)
    let onTheReactor = await Task(executorPreference: Reactor.shared) {
      BlockingPool.shared.runsCurrentThread
    }.value
    #expect(!onTheReactor)
    #expect(await offTheCooperativePool { !BlockingPool.shared.runsCurrentThread })
  }

  /// A start-up error names where libmagic looked for the system database, and `$MAGIC` when it
  /// was set, so the fix is obvious.
  @Test func theSystemDatabaseIsNamedWithItsPath() {
    let name = ContentSniffer.name(ofDatabase: nil)
    #expect(name.hasPrefix("the system magic database ("))
    if let magic = getenv("MAGIC") {
      #expect(name.contains(String(cString: magic)) && name.contains("MAGIC environment"))
    } else {
      #expect(name.contains("/usr/share/misc/magic") || name.contains("/etc/magic"))
    }
    #expect(ContentSniffer.name(ofDatabase: "/x/y.mgc") == "/x/y.mgc")
  }

  // MARK: Concurrency and speed

  @Test func concurrentSniffsAgree() async throws {
    let fixtures: [[UInt8]] = [
      ContentFixtures.wav(), ContentFixtures.png(), ContentFixtures.pdf(), ContentFixtures.zip(),
      ContentFixtures.utf8Text(), try ContentFixtures.elf(), ContentFixtures.shellScript(),
      ContentFixtures.portableExecutable(), ContentFixtures.machO(), ContentFixtures.json(),
    ]
    let sniffer = self.sniffer
    let expected = fixtures.map { sniffer.sniff($0) }
    let results = await withTaskGroup(of: (Int, SniffResult).self) { group in
      for round in 0..<100 {
        let index = round % fixtures.count
        let bytes = fixtures[index]
        group.addTask {
          (index, await BlockingPool.shared.run { sniffer.sniff(bytes) })
        }
      }
      var results: [(Int, SniffResult)] = []
      for await result in group { results.append(result) }
      return results
    }
    #expect(results.count == 100)
    for (index, result) in results { #expect(result == expected[index]) }

    // Straight from many threads at once, more threads than handles.
    let mismatches = await offTheCooperativePool { () -> Int in
      let mismatches = Atomic(0)
      DispatchQueue.concurrentPerform(iterations: 400) { round in
        let index = round % fixtures.count
        if sniffer.sniff(fixtures[index]) != expected[index] {
          mismatches.add(1, ordering: .relaxed)
        }
      }
      return mismatches.load(ordering: .relaxed)
    }
    #expect(mismatches == 0)
  }
}

extension String {
  fileprivate func leftPadded(to width: Int) -> String {
    String(repeating: "0", count: max(0, width - count)) + self
  }
}

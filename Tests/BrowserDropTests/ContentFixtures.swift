import Foundation
import Glibc

/// Real files of real types, built byte by byte in the tests (no binary fixtures in the repo).
enum ContentFixtures {
  /// A 16-bit mono PCM WAV file: RIFF header, `fmt ` chunk and `samples` of a 440 Hz tone
  /// (0.1 s by default).
  static func wav(samples count: Int = 4_410) -> [UInt8] {
    let sampleRate: UInt32 = 44_100
    var samples: [UInt8] = []
    samples.reserveCapacity(count * 2)
    for index in 0..<count {
      let value = Int16(8_000 * sin(2 * Double.pi * 440 * Double(index) / Double(sampleRate)))
      samples += le(UInt16(bitPattern: value))
    }
    var file = ascii("RIFF") + le(UInt32(36 + samples.count)) + ascii("WAVE")
    file += ascii("fmt ") + le(UInt32(16)) + le(UInt16(1)) + le(UInt16(1))
    file += le(sampleRate) + le(sampleRate * 2) + le(UInt16(2)) + le(UInt16(16))
    file += ascii("data") + le(UInt32(samples.count)) + samples
    return file
  }

  /// An MP3 stream: MPEG-1 Layer III frames (128 kbit/s, 44.1 kHz, joint stereo, 417 bytes
  /// each) of silence, optionally after an empty ID3v2.3 tag.
  static func mp3(frames: Int = 20, id3: Bool = false) -> [UInt8] {
    let frame: [UInt8] = [0xFF, 0xFB, 0x90, 0x64] + [UInt8](repeating: 0, count: 417 - 4)
    var file = id3 ? ascii("ID3") + [3, 0, 0, 0, 0, 0, 0] : []
    for _ in 0..<frames { file += frame }
    return file
  }

  /// A valid 16×16 RGB PNG: signature, IHDR, one IDAT (zlib, stored blocks) and IEND, all with
  /// their CRCs.
  static func png(width: Int = 16, height: Int = 16) -> [UInt8] {
    var raw: [UInt8] = []
    for y in 0..<height {
      raw.append(0)  // filter: none
      for x in 0..<width { raw += [UInt8(x * 16 % 256), UInt8(y * 16 % 256), 0x80] }
    }
    let header =
      be(UInt32(width)) + be(UInt32(height)) + [8, 2, 0, 0, 0]  // 8-bit RGB, no interlace
    return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
      + pngChunk("IHDR", header) + pngChunk("IDAT", zlibStored(raw)) + pngChunk("IEND", [])
  }

  /// A one-page PDF with a correct cross-reference table.
  static func pdf() -> [UInt8] {
    let content = "BT /F1 12 Tf 20 100 Td (Hello, PDF) Tj ET"
    let objects = [
      "<< /Type /Catalog /Pages 2 0 R >>",
      "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
      "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Contents 4 0 R >>",
      "<< /Length \(content.utf8.count) >>\nstream\n\(content)\nendstream",
    ]
    var text = "%PDF-1.4\n%\u{E2}\u{E3}\u{CF}\u{D3}\n"
    var offsets: [Int] = []
    for (index, body) in objects.enumerated() {
      offsets.append(text.utf8.count)
      text += "\(index + 1) 0 obj\n\(body)\nendobj\n"
    }
    let xref = text.utf8.count
    text += "xref\n0 \(objects.count + 1)\n0000000000 65535 f \n"
    for offset in offsets { text += String(format: "%010d 00000 n \n", offset) }
    text += "trailer\n<< /Size \(objects.count + 1) /Root 1 0 R >>\nstartxref\n\(xref)\n%%EOF\n"
    return Array(text.utf8)
  }

  /// A ZIP archive holding one stored (uncompressed) entry, with its CRC-32.
  static func zip(
    name: String = "hello.txt", contents: [UInt8] = ascii("Hello, zip!\n")
  ) -> [UInt8] {
    let crc = crc32(contents)
    let nameBytes = ascii(name)
    let common =
      le(UInt16(0)) + le(UInt16(0)) + le(UInt16(0x6000)) + le(UInt16(0x5A21)) + le(crc)
      + le(UInt32(contents.count)) + le(UInt32(contents.count)) + le(UInt16(nameBytes.count))
      + le(UInt16(0))
    let local = le(UInt32(0x0403_4B50)) + le(UInt16(20)) + common + nameBytes + contents
    let central =
      le(UInt32(0x0201_4B50)) + le(UInt16(20)) + le(UInt16(20)) + common + le(UInt16(0))
      + le(UInt16(0)) + le(UInt16(0)) + le(UInt32(0)) + le(UInt32(0)) + nameBytes
    let end =
      le(UInt32(0x0605_4B50)) + le(UInt16(0)) + le(UInt16(0)) + le(UInt16(1)) + le(UInt16(1))
      + le(UInt32(central.count)) + le(UInt32(local.count)) + le(UInt16(0))
    return local + central + end
  }

  /// A gzip stream of `contents` in stored deflate blocks, with CRC-32 and size.
  static func gzip(_ contents: [UInt8] = ascii("Hello, gzip!\n")) -> [UInt8] {
    [0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 3] + deflateStored(contents) + le(crc32(contents))
      + le(UInt32(contents.count))
  }

  /// UTF-8 prose with accents and a non-Latin script, `size` bytes or a little less.
  static func utf8Text(size: Int = 4_096) -> [UInt8] {
    let line = Array("Grüße aus Köln — naïve café and déjà vu in Ελληνικά και 日本語 too.\n".utf8)
    var text: [UInt8] = []
    while text.count + line.count <= size { text += line }
    return text
  }

  /// Plain ASCII prose of about `size` bytes.
  static func asciiText(size: Int = 65_536) -> [UInt8] {
    let line = ascii("The quick brown fox jumps over the lazy dog and naps in the sun.\n")
    var text: [UInt8] = []
    while text.count + line.count <= size { text += line }
    return text
  }

  /// A small JSON document.
  static func json() -> [UInt8] {
    ascii("{\"title\": \"Holiday\", \"files\": [1, 2, 3], \"shared\": true}\n")
  }

  /// A POSIX shell script.
  static func shellScript() -> [UInt8] {
    ascii("#!/bin/sh\nset -eu\necho \"hello from a script\"\nexit 0\n")
  }

  /// A Python script started through `env`.
  static func pythonScript() -> [UInt8] {
    ascii("#!/usr/bin/env python3\nprint('hello')\n")
  }

  /// A copy of `/bin/true`: a real ELF executable of this machine.
  static func elf() throws -> [UInt8] {
    try [UInt8](Data(contentsOf: URL(filePath: "/bin/true")))
  }

  /// A PE32+ (x86-64) Windows console program's headers: DOS header with `e_lfanew`, DOS stub,
  /// `PE\0\0`, COFF header, optional header and one section header, padded to 1 KiB.
  static func portableExecutable(dll: Bool = false) -> [UInt8] {
    var file = [UInt8](repeating: 0, count: 1_024)
    func put(_ bytes: [UInt8], at offset: Int) {
      file.replaceSubrange(offset..<offset + bytes.count, with: bytes)
    }
    put(ascii("MZ") + le(UInt16(0x90)) + le(UInt16(3)), at: 0)
    put(le(UInt32(0x80)), at: 0x3C)
    put(ascii("This program cannot be run in DOS mode.\r\r\n$"), at: 0x4E)
    put(ascii("PE") + [0, 0], at: 0x80)
    let characteristics: UInt16 = dll ? 0x2022 : 0x0022
    put(
      le(UInt16(0x8664)) + le(UInt16(1)) + le(UInt32(0)) + le(UInt32(0)) + le(UInt32(0))
        + le(UInt16(240)) + le(characteristics), at: 0x84)
    let optional = 0x98
    put(le(UInt16(0x20B)) + [14, 0] + le(UInt32(0x200)), at: optional)
    put(le(UInt32(0x1000)), at: optional + 16)  // entry point
    put(le(UInt64(0x1_4000_0000)), at: optional + 24)  // image base
    put(le(UInt32(0x1000)) + le(UInt32(0x200)), at: optional + 32)  // alignments
    put(le(UInt16(6)), at: optional + 40)  // OS version
    put(le(UInt16(6)), at: optional + 48)  // subsystem version
    put(le(UInt32(0x2000)) + le(UInt32(0x200)), at: optional + 56)  // image, header size
    put(le(UInt16(3)), at: optional + 68)  // console subsystem
    put(le(UInt32(16)), at: optional + 108)  // number of data directories
    put(ascii(".text") + [0, 0, 0] + le(UInt32(0x10)) + le(UInt32(0x1000)), at: optional + 240)
    put(le(UInt32(0x200)) + le(UInt32(0x200)), at: optional + 256)
    put(le(UInt32(0x6000_0020)), at: optional + 276)
    put([0xC3], at: 0x200)  // ret
    return file
  }

  /// A 64-bit little-endian Mach-O executable header (x86-64 or ARM64), padded to 4 KiB.
  static func machO(arm: Bool = false) -> [UInt8] {
    let cpu: UInt32 = arm ? 0x0100_000C : 0x0100_0007
    let subtype: UInt32 = arm ? 0 : 3
    var file =
      [0xCF, 0xFA, 0xED, 0xFE] + le(cpu) + le(subtype) + le(UInt32(2)) + le(UInt32(0))
      + le(UInt32(0)) + le(UInt32(0x0020_0085)) + le(UInt32(0))
    file += [UInt8](repeating: 0, count: 4_096 - file.count)
    return file
  }

  /// A universal (fat) Mach-O with x86-64 and ARM64 slices.
  static func fatMachO() -> [UInt8] {
    var file: [UInt8] = [0xCA, 0xFE, 0xBA, 0xBE] + be(UInt32(2))
    file += be(UInt32(0x0100_0007)) + be(UInt32(3)) + be(UInt32(4_096)) + be(UInt32(4_096))
    file += be(UInt32(12))
    file += be(UInt32(0x0100_000C)) + be(UInt32(0)) + be(UInt32(8_192)) + be(UInt32(4_096))
    file += be(UInt32(14))
    file += [UInt8](repeating: 0, count: 4_096 - file.count)
    return file + machO() + machO(arm: true)
  }

  /// The start of a Java class file (version 52, Java 8): `CAFEBABE` like a fat Mach-O.
  static func javaClass() -> [UInt8] {
    var file: [UInt8] = [0xCA, 0xFE, 0xBA, 0xBE] + be(UInt16(0)) + be(UInt16(52))
    file += be(UInt16(13))  // constant pool count
    file += [0x0A] + be(UInt16(3)) + be(UInt16(10))  // Methodref
    file += [0x07] + be(UInt16(11))  // Class
    file += [0x01] + be(UInt16(5)) + ascii("Hello")
    file += [UInt8](repeating: 0, count: 200)
    return file
  }

  // MARK: Encoding helpers

  static func ascii(_ text: String) -> [UInt8] { Array(text.utf8) }

  static func le<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
    withUnsafeBytes(of: value.littleEndian, Array.init)
  }

  static func be<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
    withUnsafeBytes(of: value.bigEndian, Array.init)
  }

  static func crc32(_ bytes: [UInt8]) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    for byte in bytes {
      crc ^= UInt32(byte)
      for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
    }
    return ~crc
  }

  private static func adler32(_ bytes: [UInt8]) -> UInt32 {
    var a: UInt32 = 1
    var b: UInt32 = 0
    for byte in bytes {
      a = (a + UInt32(byte)) % 65_521
      b = (b + a) % 65_521
    }
    return b << 16 | a
  }

  private static func deflateStored(_ bytes: [UInt8]) -> [UInt8] {
    var out: [UInt8] = []
    var start = 0
    repeat {
      let end = min(start + 65_535, bytes.count)
      let isLast: UInt8 = end == bytes.count ? 1 : 0
      out += [isLast] + le(UInt16(end - start)) + le(~UInt16(end - start))
      out += bytes[start..<end]
      start = end
    } while start < bytes.count
    return out
  }

  private static func zlibStored(_ bytes: [UInt8]) -> [UInt8] {
    [0x78, 0x01] + deflateStored(bytes) + be(adler32(bytes))
  }

  private static func pngChunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
    let typed = ascii(type) + data
    return be(UInt32(data.count)) + typed + be(crc32(typed))
  }
}

/// SplitMix64: a small seeded generator, so random bodies are the same on every run.
struct SeededGenerator: RandomNumberGenerator {
  private var state: UInt64

  init(seed: UInt64) { state = seed }

  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }

  mutating func bytes(_ count: Int) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: count)
    var index = 0
    while index < count {
      var word = next()
      for _ in 0..<min(8, count - index) {
        out[index] = UInt8(truncatingIfNeeded: word)
        word >>= 8
        index += 1
      }
    }
    return out
  }
}

/// Runs CPU-heavy test work on a thread of its own at idle priority (`SCHED_IDLE`), so it never
/// holds one of the cooperative pool's threads (two on these machines) and never delays the
/// timing of servers under test in other suites running at the same time.
func offTheCooperativePool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
  await withCheckedContinuation { continuation in
    let thread = Thread {
      // SCHED_IDLE (5 in <sched.h>) is behind _GNU_SOURCE, which Glibc's module does not set.
      let schedIdle: Int32 = 5
      var parameters = sched_param()
      let status = pthread_setschedparam(pthread_self(), schedIdle, &parameters)
      assert(status == 0, "pthread_setschedparam(SCHED_IDLE) failed with \(status)")
      continuation.resume(returning: body())
    }
    thread.start()
  }
}

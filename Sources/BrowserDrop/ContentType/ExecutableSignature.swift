import FoundationEssentials

/// Our own byte tests for executables and scripts: the only evidence that can refuse an upload.
///
/// libmagic's verdicts are guesses ranked by strength; some are very weak (it calls about 1% of
/// random byte strings a DOS COM program from their first byte alone). A refusal needs a
/// signature that random or ordinary data practically never carries:
///
/// - ELF: `7F 45 4C 46`. The class (32/64-bit) and byte order, when valid, say how to read
///   the rest; when not, the file is still an ELF binary (the kernel runs it all the same).
/// - PE: `MZ`, and `e_lfanew` (offset 0x3C) pointing at `PE\0\0` inside the prefix. An `MZ`
///   header alone (MS-DOS, or just two letters) is not enough.
/// - Mach-O: `FEEDFACE`/`FEEDFACF` in either byte order with a known CPU type and file type.
/// - Universal (fat) Mach-O: `CAFEBABE`/`CAFEBABF` with 1–19 architectures, the first one a known
///   CPU type. Java class files share `CAFEBABE`, but their next four bytes (minor and major
///   version, major ≥ 45) read as a count of at least 45, so they are never taken for Mach-O;
///   Java classes run only inside a JVM and are not flagged.
/// - Scripts: `#!`, optional blanks, then an absolute interpreter path that ends within the
///   256 bytes the kernel reads (`/dir/program`, the program's name starting with a letter), on
///   a first line of printable text (UTF-8 allowed).
enum ExecutableSignature {
  /// Describes the executable or script whose signature starts `bytes`, as a noun phrase without
  /// an article ("ELF executable for x86-64"); `nil` when there is no strong signature.
  static func describe(_ bytes: UnsafeRawBufferPointer) -> String? {
    let reader = ByteReader(bytes: bytes)
    return elf(reader) ?? portableExecutable(reader) ?? machO(reader) ?? fatMachO(reader)
      ?? script(reader)
  }

  // MARK: ELF

  private static func elf(_ reader: ByteReader) -> String? {
    guard reader.matches([0x7F, 0x45, 0x4C, 0x46], at: 0) else { return nil }
    // The four magic bytes are the signature. Linux checks neither the class, byte order nor
    // version byte before running a file (only its type and machine, read in its own layout),
    // so a file whose identification bytes are odd is still an ELF binary.
    guard let elfClass = reader.byte(at: 4), elfClass == 1 || elfClass == 2,
      let order = reader.byte(at: 5), order == 1 || order == 2
    else { return malformedELF(reader) }
    let littleEndian = order == 1
    let is64 = elfClass == 2
    let type = reader.uint16(at: 0x10, littleEndian: littleEndian)
    let machine = reader.uint16(at: 0x12, littleEndian: littleEndian).flatMap(elfMachines)

    let what: String
    switch type {
    case 1: what = "ELF object file"
    case 2: what = "ELF executable"
    case 3:
      // Position-independent executables and shared libraries share ET_DYN; an executable names
      // its program interpreter (PT_INTERP).
      what =
        elfHasInterpreter(reader, is64: is64, littleEndian: littleEndian)
        ? "ELF executable" : "ELF shared library"
    case 4: what = "ELF core dump"
    default: what = "ELF binary"
    }
    return machine.map { "\(what) for \($0)" } ?? what
  }

  /// An ELF file with an unknown class or byte order: an executable when its type and machine,
  /// read in either byte order, name one.
  private static func malformedELF(_ reader: ByteReader) -> String {
    for littleEndian in [true, false] {
      if let type = reader.uint16(at: 0x10, littleEndian: littleEndian), type == 2 || type == 3,
        let machine = reader.uint16(at: 0x12, littleEndian: littleEndian).flatMap(elfMachines)
      {
        return "ELF executable for \(machine) (with a malformed header)"
      }
    }
    return "ELF binary (with a malformed header)"
  }

  private static func elfHasInterpreter(
    _ reader: ByteReader, is64: Bool, littleEndian: Bool
  ) -> Bool {
    let offset: UInt64?
    let entrySize: UInt16?
    let count: UInt16?
    if is64 {
      offset = reader.uint64(at: 0x20, littleEndian: littleEndian)
      entrySize = reader.uint16(at: 0x36, littleEndian: littleEndian)
      count = reader.uint16(at: 0x38, littleEndian: littleEndian)
    } else {
      offset = reader.uint32(at: 0x1C, littleEndian: littleEndian).map(UInt64.init)
      entrySize = reader.uint16(at: 0x2A, littleEndian: littleEndian)
      count = reader.uint16(at: 0x2C, littleEndian: littleEndian)
    }
    guard let offset, let entrySize, let count, entrySize >= 4,
      offset < UInt64(reader.count)
    else { return false }
    let interpreter: UInt32 = 3
    for index in 0..<Int(count) {
      let position = Int(offset) + index * Int(entrySize)
      guard let type = reader.uint32(at: position, littleEndian: littleEndian) else { break }
      if type == interpreter { return true }
    }
    return false
  }

  private static func elfMachines(_ machine: UInt16) -> String? {
    switch machine {
    case 0x03: "x86"
    case 0x3E: "x86-64"
    case 0x28: "ARM"
    case 0xB7: "ARM64"
    case 0xF3: "RISC-V"
    case 0x08: "MIPS"
    case 0x14: "PowerPC"
    case 0x15: "PowerPC 64"
    case 0x16: "IBM S/390"
    case 0x2B: "SPARC V9"
    case 0x102: "LoongArch"
    default: nil
    }
  }

  // MARK: PE

  private static func portableExecutable(_ reader: ByteReader) -> String? {
    guard reader.matches([0x4D, 0x5A], at: 0),
      let headerOffset = reader.uint32(at: 0x3C, littleEndian: true),
      headerOffset >= 4, headerOffset <= UInt32(reader.count),
      reader.matches([0x50, 0x45, 0, 0], at: Int(headerOffset))
    else { return nil }
    let header = Int(headerOffset)
    // COFF header: Machine (2), NumberOfSections (2), …, Characteristics at +18; it must be whole.
    guard let machine = reader.uint16(at: header + 4, littleEndian: true),
      let characteristics = reader.uint16(at: header + 22, littleEndian: true)
    else { return nil }
    let isLibrary = characteristics & 0x2000 != 0
    var what = isLibrary ? "Windows DLL (PE)" : "Windows executable (PE)"
    // Subsystem sits at the same offset (68) in PE32 and PE32+ optional headers.
    if let subsystem = reader.uint16(at: header + 24 + 68, littleEndian: true),
      (10...13).contains(subsystem)
    {
      what = "EFI executable (PE)"
    }
    let architecture: String? =
      switch machine {
      case 0x014C: "x86"
      case 0x8664: "x86-64"
      case 0x01C0, 0x01C2, 0x01C4: "ARM"
      case 0xAA64: "ARM64"
      default: nil
      }
    return architecture.map { "\(what) for \($0)" } ?? what
  }

  // MARK: Mach-O

  private static func machO(_ reader: ByteReader) -> String? {
    let littleEndian: Bool
    if reader.matches([0xFE, 0xED, 0xFA, 0xCE], at: 0)
      || reader.matches([0xFE, 0xED, 0xFA, 0xCF], at: 0)
    {
      littleEndian = false
    } else if reader.matches([0xCE, 0xFA, 0xED, 0xFE], at: 0)
      || reader.matches([0xCF, 0xFA, 0xED, 0xFE], at: 0)
    {
      littleEndian = true
    } else {
      return nil
    }
    guard let cpu = reader.uint32(at: 4, littleEndian: littleEndian).flatMap(machCPU),
      let fileType = reader.uint32(at: 12, littleEndian: littleEndian),
      (1...12).contains(fileType)
    else { return nil }
    let what =
      switch fileType {
      case 1: "Mach-O object file"
      case 2: "Mach-O executable"
      case 6: "Mach-O dynamic library"
      case 8: "Mach-O bundle"
      case 11: "Mach-O kernel extension"
      default: "Mach-O binary"
      }
    return "\(what) for \(cpu)"
  }

  private static func fatMachO(_ reader: ByteReader) -> String? {
    guard
      reader.matches([0xCA, 0xFE, 0xBA, 0xBE], at: 0)
        || reader.matches([0xCA, 0xFE, 0xBA, 0xBF], at: 0),
      // Java class files continue with minor and major version (major ≥ 45): as one count that
      // is at least 45, well above any real universal binary.
      let architectures = reader.uint32(at: 4, littleEndian: false),
      (1...19).contains(architectures),
      reader.uint32(at: 8, littleEndian: false).flatMap(machCPU) != nil
    else { return nil }
    return "Mach-O universal binary"
  }

  private static func machCPU(_ type: UInt32) -> String? {
    switch type {
    case 7: "x86"
    case 0x0100_0007: "x86-64"
    case 12: "ARM"
    case 0x0100_000C: "ARM64"
    case 0x0200_000C: "ARM64_32"
    case 18: "PowerPC"
    case 0x0100_0012: "PowerPC 64"
    default: nil
    }
  }

  // MARK: Scripts

  /// The kernel reads at most this much of a `#!` line (BINPRM_BUF_SIZE).
  private static let scriptLineLimit = 256

  private static func script(_ reader: ByteReader) -> String? {
    guard reader.matches([0x23, 0x21], at: 0) else { return nil }
    // What the kernel reads of the first line: up to its LF or a NUL (where its string ends),
    // within its 256-byte buffer (which a shorter file ends, as if with a LF).
    let limit = min(reader.count, scriptLineLimit)
    var line: [UInt8] = []
    var index = 2
    while index < limit, let byte = reader.byte(at: index), byte != 0x0A, byte != 0 {
      // Printable ASCII, tab, a CR before the LF, or UTF-8 in the arguments; anything else is
      // not a command line.
      guard byte == 0x09 || byte == 0x0D || (0x20...0x7E).contains(byte) || byte >= 0x80
      else { return nil }
      line.append(byte)
      index += 1
    }
    let lineEnded = index < limit || reader.count <= scriptLineLimit
    let blank: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }
    guard let start = line.firstIndex(where: { !blank($0) }) else { return nil }
    let end = line[start...].firstIndex(where: blank) ?? line.endIndex
    // A first line longer than the buffer still runs, as long as the interpreter's path ends
    // inside it (Linux 5.0 and later refuse only a cut-off path).
    guard lineEnded || end < line.endIndex else { return nil }
    let interpreter = String(decoding: line[start..<end], as: UTF8.self)
    guard isPlausibleInterpreter(interpreter) else { return nil }

    let text = String(decoding: line[start...], as: UTF8.self)
      .trimming { $0 == " " || $0 == "\t" || $0 == "\r" }
    let words = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
    var program = interpreter.split(separator: "/").last.map(String.init) ?? interpreter
    if program == "env" {
      // `#!/usr/bin/env [-S] python3`: the program is the first word that is not an option.
      program = words.dropFirst().first(where: { !$0.hasPrefix("-") && !$0.contains("=") }) ?? ""
    }
    let shown = text.count > 60 ? String(text.prefix(57)) + "..." : text
    return "\(scriptLanguage(program)) (#!\(shown))"
  }

  /// An absolute path with at least one directory (`/bin/sh`, `/usr/bin/env`), no empty
  /// segment, only the characters file names of interpreters use, and a program name that starts
  /// with a letter. Random bytes after `#!/` practically never form one.
  private static func isPlausibleInterpreter(_ path: String) -> Bool {
    guard path.hasPrefix("/") else { return false }
    let segments = path.dropFirst().split(separator: "/", omittingEmptySubsequences: false)
    guard segments.count >= 2, segments.allSatisfy({ !$0.isEmpty }),
      let program = segments.last?.first, program.isASCII, program.isLetter
    else { return false }
    return path.utf8.allSatisfy { byte in
      switch byte {
      case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
        UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "/"), UInt8(ascii: "."),
        UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "+"):
        true
      default: false
      }
    }
  }

  private static func scriptLanguage(_ program: String) -> String {
    let name = program.lowercased()
    let stem = String(name.prefix(while: { $0.isLetter }))
    switch stem {
    case "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "csh", "tcsh", "fish", "busybox":
      return "shell script"
    case "python", "pypy": return "Python script"
    case "perl": return "Perl script"
    case "ruby": return "Ruby script"
    case "node", "nodejs", "deno", "bun": return "JavaScript script"
    case "php": return "PHP script"
    case "lua", "luajit": return "Lua script"
    case "tclsh", "wish": return "Tcl script"
    case "awk", "gawk", "mawk", "nawk": return "awk script"
    case "pwsh": return "PowerShell script"
    default: return "script"
    }
  }
}

/// Bounds-checked reads of fixed-width integers from a byte buffer; `nil` past its end.
struct ByteReader {
  let bytes: UnsafeRawBufferPointer

  var count: Int { bytes.count }

  func byte(at offset: Int) -> UInt8? {
    offset >= 0 && offset < bytes.count ? bytes[offset] : nil
  }

  func matches(_ expected: [UInt8], at offset: Int) -> Bool {
    guard offset >= 0, offset + expected.count <= bytes.count else { return false }
    for (index, byte) in expected.enumerated() where bytes[offset + index] != byte {
      return false
    }
    return true
  }

  func uint16(at offset: Int, littleEndian: Bool) -> UInt16? {
    integer(at: offset, width: 2, littleEndian: littleEndian).map { UInt16($0) }
  }

  func uint32(at offset: Int, littleEndian: Bool) -> UInt32? {
    integer(at: offset, width: 4, littleEndian: littleEndian).map { UInt32($0) }
  }

  func uint64(at offset: Int, littleEndian: Bool) -> UInt64? {
    integer(at: offset, width: 8, littleEndian: littleEndian)
  }

  private func integer(at offset: Int, width: Int, littleEndian: Bool) -> UInt64? {
    guard offset >= 0, width <= bytes.count, offset <= bytes.count - width else { return nil }
    var value: UInt64 = 0
    for index in 0..<width {
      let byte = UInt64(bytes[offset + (littleEndian ? width - 1 - index : index)])
      value = value << 8 | byte
    }
    return value
  }
}

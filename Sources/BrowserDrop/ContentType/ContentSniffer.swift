import BrowserDropSystem
internal import CMagic
import FoundationEssentials
import Glibc
internal import Synchronization

/// Tells what a file really is from its first bytes, with libmagic and our own executable
/// signatures (``ExecutableSignature``).
///
/// One sniffer serves the whole process: it loads the magic database once per handle at
/// creation, so a missing or broken database fails there, once. libmagic handles are not
/// thread-safe, so each handle has its own lock; there are a few handles (one per core, up to
/// four) so sniffs on different threads rarely wait for each other.
///
/// ``sniff(_:)`` is synchronous and takes from about 0.02 ms (a PNG) to 3 ms (64 KiB of prose,
/// where libmagic runs its text regexes): call it on `BlockingPool`, never on the cooperative
/// pool or the reactor.
final class ContentSniffer: Sendable {
  /// How much of a file to sniff: the first 64 KiB, or the whole file when it is smaller.
  static let prefixLength = 64 * 1024

  /// MIME type and encoding in one answer (`image/png; charset=binary`). Decompression, tar
  /// checksums of compressed data, ELF section details (which need a file descriptor anyway)
  /// and OS/2 application types are skipped: they cost time and change nothing we report.
  private static let flags =
    MAGIC_MIME_TYPE | MAGIC_MIME_ENCODING | MAGIC_NO_CHECK_COMPRESS | MAGIC_NO_COMPRESS_FORK
    | MAGIC_NO_CHECK_ELF | MAGIC_NO_CHECK_APPTYPE

  /// libmagic's names for executables; believed only when ``ExecutableSignature`` agrees.
  private static let executableTypes: Set<String> = [
    "application/x-dosexec", "application/x-executable", "application/x-pie-executable",
    "application/x-sharedlib", "application/x-mach-binary", "application/x-object",
    "application/x-coredump", "application/vnd.microsoft.portable-executable",
    "application/x-ms-ne-executable", "application/x-lx-executable",
    "application/x-ms-w3-executable", "application/x-ms-w4-executable", "application/x-dosdriver",
    "application/x-msdownload",
  ]

  private let handles: [MagicHandle]
  /// Every received file keeps its MIME type for the session's life: one shared copy per type.
  private let mimeTypes = InternedStrings(capacity: 1024)
  private let nextHandle = Atomic<Int>(0)

  /// Loads the magic database into `handleCount` handles.
  ///
  /// - Parameters:
  ///   - databasePath: a compiled (`.mgc`) or source magic file; `nil` for the system database
  ///     (`/usr/share/misc/magic.mgc`, or `$MAGIC` when set).
  ///   - handleCount: how many sniffs may run at once; one per core, up to four, by default.
  /// - Throws: `BrowserDropError.contentDatabaseUnavailable` when the database is missing,
  ///   unreadable, or cannot tell a PNG image from unknown data.
  init(databasePath: String? = nil, handleCount: Int? = nil) throws(BrowserDropError) {
    let count = max(1, handleCount ?? min(ProcessInfo.processInfo.activeProcessorCount, 4))
    // `magic_load` maps the database once per handle, and the resident set counts the pages of
    // each mapping: 8 MiB more per handle once a few hundred uploads have touched them all.
    let database = MappedDatabase(for: databasePath)
    var handles: [MagicHandle] = []
    for _ in 0..<count {
      handles.append(
        try MagicHandle(flags: Self.flags, databasePath: databasePath, database: database))
    }
    self.handles = handles

    // A database that loads but knows nothing would report every upload as unknown.
    let probe = Self.pngProbe.withUnsafeBytes { handles[0].identify($0) }
    guard probe?.hasPrefix("image/png") == true else {
      throw .contentDatabaseUnavailable(
        "\(Self.name(ofDatabase: databasePath)) loaded but does not recognise a PNG "
          + "image (it answered \(probe ?? "nothing"))")
    }
  }

  /// How an error names the database: the path given, or the system database with the paths
  /// libmagic searched (`$MAGIC` when set, which the message then says).
  static func name(ofDatabase databasePath: String?) -> String {
    if let databasePath { return databasePath }
    let searched = magic_getpath(nil, 0).map { String(cString: $0) } ?? "its default path"
    let fromEnvironment = getenv("MAGIC") != nil ? ", set by the MAGIC environment variable" : ""
    return "the system magic database (\(searched)\(fromEnvironment))"
  }

  /// Sniffs a file's first bytes (up to ``prefixLength``; the whole file when smaller).
  ///
  /// Never fails: content libmagic cannot read is reported as `application/octet-stream`.
  func sniff(_ prefix: UnsafeRawBufferPointer) -> SniffResult {
    let bytes = UnsafeRawBufferPointer(rebasing: prefix.prefix(Self.prefixLength))
    let answer = identify(bytes) ?? SniffResult.unknownType
    let (parsedType, charset) = Self.parse(answer, isEmpty: bytes.isEmpty)
    let libmagicType = mimeTypes.intern(parsedType)
    let executable = ExecutableSignature.describe(bytes)
    let mimeType =
      executable == nil && Self.executableTypes.contains(libmagicType)
      ? SniffResult.unknownType : libmagicType
    return SniffResult(
      mimeType: mimeType, charset: charset, kind: ContentKind(mimeType: mimeType),
      executable: executable, libmagicMimeType: libmagicType)
  }

  /// Sniffs the first bytes of `bytes`.
  func sniff(_ bytes: [UInt8]) -> SniffResult {
    bytes.withUnsafeBytes { sniff($0) }
  }

  /// Sniffs the first bytes of `data`.
  func sniff(_ data: Data) -> SniffResult {
    data.withUnsafeBytes { sniff($0) }
  }

  /// Reads the first ``prefixLength`` bytes of the file at `url` and sniffs them. Blocking I/O.
  func sniff(contentsOf url: URL) throws -> SniffResult {
    let fd = try Syscall.blocking("open") { open(url.path, O_RDONLY | O_CLOEXEC) }
    defer { close(fd) }
    var prefix = [UInt8](repeating: 0, count: Self.prefixLength)
    var count = 0
    while count < prefix.count {
      let read = try prefix.withUnsafeMutableBytes { buffer in
        try Syscall.blocking("read") {
          Glibc.read(fd, buffer.baseAddress! + count, buffer.count - count)
        }
      }
      if read == 0 { break }
      count += read
    }
    return sniff(Array(prefix[..<count]))
  }

  /// libmagic's answer from the first free handle, or from the next one in turn (waiting for
  /// it) when all are busy.
  private func identify(_ bytes: UnsafeRawBufferPointer) -> String? {
    let start = nextHandle.wrappingAdd(1, ordering: .relaxed).oldValue & Int.max
    for offset in 0..<handles.count {
      if let answer = handles[(start + offset) % handles.count].identifyIfFree(bytes) {
        return answer
      }
    }
    return handles[start % handles.count].identify(bytes)
  }

  /// Splits `image/png; charset=binary` into a lowercased type and a charset (`nil` for binary).
  private static func parse(_ answer: String, isEmpty: Bool) -> (String, String?) {
    let parts = answer.split(separator: ";", maxSplits: 1)
    var type = parts.first.map { $0.trimmingWhitespace().lowercased() } ?? ""
    // libmagic 5.44 names an empty buffer `application/x-empty`; older ones `inode/x-empty`.
    if isEmpty || type.hasSuffix("/x-empty") {
      type = SniffResult.emptyType
    } else if !type.contains("/") {
      type = SniffResult.unknownType
    }
    var charset: String?
    if parts.count == 2 {
      let parameter = parts[1].trimmingWhitespace().lowercased()
      if parameter.hasPrefix("charset=") {
        let value = String(parameter.dropFirst("charset=".count))
        if value != "binary" && !value.isEmpty { charset = value }
      }
    }
    return (type, charset)
  }

  /// The 8-byte signature and IHDR chunk of a 1×1 PNG: every usable database knows it.
  private static let pngProbe: [UInt8] = [
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44,
    0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F,
    0x15, 0xC4, 0x89,
  ]
}

/// One libmagic cookie and the lock that serialises its use.
private final class MagicHandle: Sendable {
  /// `@unchecked Sendable`: the pointer is only dereferenced (by libmagic) while `cookie` is
  /// locked, and closed once, in `deinit`.
  private struct Cookie: @unchecked Sendable {
    let pointer: OpaquePointer
  }

  private let cookie: Mutex<Cookie>
  /// The mapped database the cookie reads in place, kept until the cookie is closed.
  private let database: MappedDatabase?

  /// Opens a cookie and loads the database into it: from `database` when given
  /// (`magic_load_buffers`, which reads the mapping in place), else from `databasePath`
  /// (`magic_load`; `nil` for the system database).
  init(flags: Int32, databasePath: String?, database: MappedDatabase?) throws(BrowserDropError) {
    guard let cookie = magic_open(flags) else {
      throw .contentDatabaseUnavailable("libmagic could not allocate a handle (magic_open)")
    }
    let status: Int32
    if let database {
      var buffers: [UnsafeMutableRawPointer?] = [database.base]
      var sizes = [database.size]
      status = magic_load_buffers(cookie, &buffers, &sizes, 1)
    } else {
      status = magic_load(cookie, databasePath)
    }
    if status != 0 {
      var reason = magic_error(cookie).map { String(cString: $0) } ?? "magic_load failed"
      reason = String(reason.reversed().drop(while: { "!. ".contains($0) }).reversed())
      if let database {
        // libmagic names a database loaded from memory `buffer'; say which file it was.
        reason = reason.replacing("`buffer'", with: database.path)
      }
      magic_close(cookie)
      throw .contentDatabaseUnavailable(
        "\(ContentSniffer.name(ofDatabase: databasePath)): \(reason)")
    }
    self.cookie = Mutex(Cookie(pointer: cookie))
    self.database = database
  }

  deinit {
    cookie.withLock { magic_close($0.pointer) }
  }

  /// libmagic's answer for `bytes`, or `nil` when it reports an error; waits while another
  /// thread uses the handle (`magic_buffer`).
  func identify(_ bytes: UnsafeRawBufferPointer) -> String? {
    cookie.withLock { Self.identify(bytes, with: $0.pointer) }
  }

  /// Like ``identify(_:)`` but returns `.none` at once when the handle is busy.
  func identifyIfFree(_ bytes: UnsafeRawBufferPointer) -> String?? {
    cookie.withLockIfAvailable { Self.identify(bytes, with: $0.pointer) }
  }

  private static func identify(
    _ bytes: UnsafeRawBufferPointer, with cookie: OpaquePointer
  ) -> String? {
    // An empty buffer may have no base address; libmagic wants a pointer anyway.
    withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1) { spare in
      magic_buffer(cookie, bytes.baseAddress ?? UnsafeRawPointer(spare.baseAddress!), bytes.count)
        .map { String(cString: $0) }
    }
  }
}

/// A compiled magic database mapped once, read in place by every handle.
///
/// `@unchecked Sendable`: the mapping is read by libmagic under each handle's lock and unmapped
/// once, in `deinit`, after every handle holding it has closed its cookie.
final class MappedDatabase: @unchecked Sendable {
  /// The start of the mapping.
  let base: UnsafeMutableRawPointer
  /// The compiled database file that is mapped.
  let path: String
  /// The database's length in bytes.
  let size: Int

  /// Maps the one compiled database `databasePath` names (`nil`: libmagic's default list, such
  /// as `/etc/magic:/usr/share/misc/magic`, or `$MAGIC`). `nil` when it names anything else, a
  /// source file with definitions or several databases, or the file cannot be mapped: the
  /// handles then load it themselves with `magic_load`.
  init?(for databasePath: String?) {
    guard
      let list = databasePath ?? magic_getpath(nil, 0).map({ String(cString: $0) }),
      let path = Self.compiledDatabase(in: list)
    else { return nil }
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0, info.st_size > 0 else { return nil }
    // Private and writable, as `magic_load` maps it: libmagic may byte-swap a foreign-endian
    // file in place, which then copies only the pages it writes.
    guard
      let base = mmap(nil, Int(info.st_size), PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0),
      base != MAP_FAILED
    else { return nil }
    self.base = base
    self.size = Int(info.st_size)
    self.path = path
  }

  deinit { munmap(base, size) }

  /// The path of the single compiled database in a colon-separated magic path, as libmagic
  /// resolves it (`NAME.mgc` beside a plain `NAME`); files holding nothing but comments (the
  /// stock `/etc/magic`) are skipped.
  static func compiledDatabase(in list: String) -> String? {
    var found: String?
    for component in list.split(separator: ":").map(String.init) {
      let compiled = component.hasSuffix(".mgc") ? component : component + ".mgc"
      if access(compiled, R_OK) == 0 {
        guard found == nil else { return nil }
        found = compiled
      } else if !Self.holdsNoDefinitions(component) {
        return nil
      }
    }
    return found
  }

  /// Whether the file at `path` is missing or has only blank and `#` comment lines.
  private static func holdsNoDefinitions(_ path: String) -> Bool {
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
      return access(path, F_OK) != 0
    }
    return text.split(whereSeparator: \.isNewline).allSatisfy { line in
      let trimmed = line.drop(while: { $0 == " " || $0 == "\t" })
      return trimmed.isEmpty || trimmed.hasPrefix("#")
    }
  }
}

/// A bounded set of strings handed out as shared copies: `intern` returns the stored string equal
/// to its argument, so equal values share one buffer instead of one allocation each. Past
/// `capacity` distinct values, new ones are returned as they are.
final class InternedStrings: Sendable {
  private let capacity: Int
  private let strings = Mutex<Set<String>>([])

  init(capacity: Int) { self.capacity = capacity }

  func intern(_ string: String) -> String {
    strings.withLock { strings in
      if let index = strings.firstIndex(of: string) { return strings[index] }
      if strings.count < capacity { strings.insert(string) }
      return string
    }
  }
}

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
/// ``sniff(_:)`` is synchronous and takes from a few microseconds (random or unknown binary data,
/// which ``SoftMagicScreen`` spares libmagic's walk of its whole database) to 3 ms (64 KiB of
/// prose, where libmagic runs its text regexes): call it on `BlockingPool`, never on the
/// cooperative pool or the reactor. Only ``sniffIfQuick(_:)``, which answers only from the small
/// databases and never waits for a handle, may run elsewhere.
final class ContentSniffer: Sendable {
  /// How much of a file to sniff: the first 64 KiB, or the whole file when it is smaller.
  static let prefixLength = 64 * 1024

  /// MIME type and encoding in one answer (`image/png; charset=binary`). Decompression, tar
  /// checksums of compressed data, ELF section details (which need a file descriptor anyway)
  /// and OS/2 application types are skipped: they cost time and change nothing we report.
  /// `MAGIC_RAW` skips the copy libmagic makes of every answer to escape unprintable bytes
  /// (`file_getbuffer`, a tenth of a small database's call on random data, callgrind): in MIME
  /// mode it prints only the database's MIME types, all printable ASCII, and charset names.
  private static let flags =
    MAGIC_MIME_TYPE | MAGIC_MIME_ENCODING | MAGIC_NO_CHECK_COMPRESS | MAGIC_NO_COMPRESS_FORK
    | MAGIC_NO_CHECK_ELF | MAGIC_NO_CHECK_APPTYPE | MAGIC_RAW

  /// libmagic with the whole database, as loaded.
  private let handles: MagicHandles
  /// libmagic with the small database ``SoftMagicScreen`` leaves, for binary data it clears;
  /// `nil` when the database or libmagic is not one the screen was checked against.
  let residual: ResidualLibmagic?
  /// libmagic's answers, parsed once each. Every received file keeps its MIME type for the
  /// session's life: one shared copy per type.
  private let answers = MagicAnswers(capacity: 1024)

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
    self.handles = MagicHandles(handles)
    residual = ResidualLibmagic(database: database, handleCount: count, flags: Self.flags)

    // A database that loads but knows nothing would report every upload as unknown.
    let probe = Self.pngProbe.withUnsafeBytes { handles[0].identify($0) }
    guard probe?.hasPrefix("image/png") == true else {
      throw .contentDatabaseUnavailable(
        "\(Self.name(ofDatabase: databasePath)) loaded but does not recognise a PNG "
          + "image (it answered \(probe ?? "nothing"))")
    }
    // The probe's walk read the mapping up to the PNG rule (0.9 MiB). With the screen in use,
    // binary data no longer walks it, so those pages go too; the screen checked that the
    // mapping is native-endian, so libmagic never wrote to it and nothing is lost.
    if let database, residual != nil { madvise(database.base, database.size, MADV_DONTNEED) }
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
    let answer =
      residual?.identifyIfCleared(bytes, answers.answer) ?? handles.identify(bytes, answers.answer)
    return result(answer ?? answers.unknown, for: bytes)
  }

  /// ``sniff(_:)``'s answer when a small database gives it at once (binary data the screen
  /// clears, a free handle), `nil` otherwise: then ``sniff(_:)`` on the blocking pool. On a
  /// short buffer it answers in tens of microseconds, so it may run on a thread that must not
  /// wait (the only lock it may wait on is the MIME type table's, held for a lookup).
  func sniffIfQuick(_ prefix: UnsafeRawBufferPointer) -> SniffResult? {
    let bytes = UnsafeRawBufferPointer(rebasing: prefix.prefix(Self.prefixLength))
    guard let answer = residual?.identifyIfClearedWithoutWaiting(bytes, answers.answer) else {
      return nil
    }
    return result(answer, for: bytes)
  }

  /// Sniffs with libmagic and the whole database only, as before the screen: what
  /// ``sniff(_:)`` must agree with (tests and benchmarks compare the two).
  func sniffWithWholeDatabase(_ prefix: UnsafeRawBufferPointer) -> SniffResult {
    let bytes = UnsafeRawBufferPointer(rebasing: prefix.prefix(Self.prefixLength))
    return result(handles.identify(bytes, answers.answer) ?? answers.unknown, for: bytes)
  }

  private func result(
    _ answer: MagicAnswers.Answer, for bytes: UnsafeRawBufferPointer
  ) -> SniffResult {
    var answer = answer
    if bytes.isEmpty && answer.mimeType != SniffResult.emptyType {
      answer = MagicAnswers.Answer(
        mimeType: SniffResult.emptyType, charset: answer.charset,
        kind: ContentKind(mimeType: SniffResult.emptyType), namesExecutable: false)
    }
    let executable = ExecutableSignature.describe(bytes)
    // libmagic's executable types are believed only when ``ExecutableSignature`` agrees.
    let disbelieved = executable == nil && answer.namesExecutable
    return SniffResult(
      mimeType: disbelieved ? answers.unknown.mimeType : answer.mimeType, charset: answer.charset,
      kind: disbelieved ? answers.unknown.kind : answer.kind, executable: executable,
      libmagicMimeType: answer.mimeType)
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

  /// The 8-byte signature and IHDR chunk of a 1×1 PNG: every usable database knows it.
  private static let pngProbe: [UInt8] = [
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44,
    0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F,
    0x15, 0xC4, 0x89,
  ]
}

internal import CMagic
import Glibc

/// libmagic on the small database ``SoftMagicScreen`` leaves to it, for the binary data the
/// screen clears: the same answer as the whole database gives, for a fraction of the work.
///
/// The handles run libmagic's other checks as usual (tar, JSON, CSV, CDF) but not its encoding
/// and text passes: ``BinaryContent/looksBinaryToLibmagic(_:)`` has already shown the data is
/// binary, which is what those passes would find (and then the charset is `binary`, as
/// without them).
final class ResidualLibmagic: Sendable {
  /// The libmagic release whose matching code (softmagic.c, encoding.c) the screen and
  /// ``BinaryContent`` follow; with any other, every upload goes to the whole database.
  static let checkedVersion: Int32 = 544

  /// How the whole database was split.
  let screen: SoftMagicScreen
  /// Handles on ``SoftMagicScreen/residualDatabase`` and ``SoftMagicScreen/unscreenedDatabase``.
  private let residual: MagicHandles
  private let unscreened: MagicHandles
  /// Databases made for binary data that strong rules may match.
  private let tailored: TailoredLibmagic

  /// Splits `database` (the mapped compiled database the sniffer's handles read) and loads
  /// the two smaller databases into `handleCount` handles each; `nil` when there is no mapped
  /// database, the running libmagic is not ``checkedVersion``, the format is unknown, or loading
  /// fails. The sniffer then uses the whole database for everything, as it did before.
  init?(database mapped: MappedDatabase?, handleCount: Int, flags: Int32) {
    guard let mapped, magic_version() == Self.checkedVersion,
      let magic = CompiledMagic(base: UnsafeRawPointer(mapped.base), size: mapped.size),
      var screen = SoftMagicScreen(magic, release: { Self.release($0, of: mapped) })
    else { return nil }
    let databases = screen.takeDatabases()
    let flags = flags | MAGIC_NO_CHECK_ENCODING | MAGIC_NO_CHECK_TEXT
    func load(_ database: BuiltDatabase) -> MagicHandles? {
      var handles: [MagicHandle] = []
      for _ in 0..<max(1, handleCount) {
        guard let handle = try? MagicHandle(flags: flags, databasePath: nil, database: database)
        else { return nil }
        handles.append(handle)
      }
      return MagicHandles(handles)
    }
    let residualDatabase = BuiltDatabase(
      databases.residual, path: "the weak and unscreened rules of \(mapped.path)")
    let unscreenedDatabase = BuiltDatabase(
      databases.unscreened, path: "the unscreened rules of \(mapped.path)")
    guard let residual = load(residualDatabase), let unscreened = load(unscreenedDatabase)
    else { return nil }
    self.screen = screen
    self.residual = residual
    self.unscreened = unscreened
    tailored = TailoredLibmagic(
      slotCount: handleCount, screen: screen, whole: mapped, residual: residualDatabase,
      unscreened: unscreenedDatabase, flags: flags)
    // Building the screen read every record of the mapping; random and unknown binary data no
    // longer walks it, so let those pages go (they come back from the page cache when text or a
    // known format does). The mapping is native-endian (`CompiledMagic` checked), so libmagic
    // never wrote to it and nothing is lost.
    madvise(mapped.base, mapped.size, MADV_DONTNEED)
  }

  /// Drops the pages that lie wholly inside `records` of the mapping. It is private and
  /// native-endian (`CompiledMagic` checked), so libmagic never wrote to it: a page read again
  /// comes back from the page cache as it was.
  static func release(_ records: Range<Int>, of mapped: MappedDatabase) {
    let page = Int(sysconf(Int32(_SC_PAGESIZE)))
    let start = (records.lowerBound + 1) * CompiledMagic.entrySize
    let end = min((records.upperBound + 1) * CompiledMagic.entrySize, mapped.size)
    let first = (start + page - 1) / page * page
    let last = end / page * page
    guard last > first else { return }
    madvise(mapped.base + first, last - first, MADV_DONTNEED)
  }

  /// `read` applied to libmagic's answer for `bytes` from a smaller database when the screen
  /// shows it is the whole database's answer; `nil` when the whole database must be asked, and
  /// when libmagic reports an error.
  func identifyIfCleared<T: Sendable>(
    _ bytes: UnsafeRawBufferPointer, _ read: (UnsafePointer<CChar>) -> T
  ) -> T? {
    var strongRules: [Int32] = []
    switch verdict(bytes, strongRules: &strongRules) {
    case .wholeDatabase: return nil
    case .residual: return residual.identify(bytes, read)
    case .unscreened: return unscreened.identify(bytes, read)
    case .strongRules(let onResidual):
      // About a millisecond less than the whole database's walk on random data, which also
      // read nearly every page of its mapping: 7.5 MiB of resident set in the peers' W2.
      let key = TailoredLibmagic.Key(strongRules: strongRules, onResidual: onResidual)
      return tailored.identify(bytes, key: key, read)
    }
  }

  /// Like ``identifyIfCleared(_:_:)``, but never waits for a handle: `nil` when the whole
  /// database must be asked, every small database's handle is busy, or libmagic reports an
  /// error. A small database's walk is short (about 0.1M instructions on 16 KiB of random
  /// data), so this may run where waiting may not.
  func identifyIfClearedWithoutWaiting<T: Sendable>(
    _ bytes: UnsafeRawBufferPointer, _ read: (UnsafePointer<CChar>) -> T
  ) -> T? {
    switch verdict(bytes) {
    case .wholeDatabase, .strongRules: nil
    case .residual: residual.identifyWithoutWaiting(bytes, read)
    case .unscreened: unscreened.identifyWithoutWaiting(bytes, read)
    }
  }

  /// Which database answers for `bytes`: a smaller one only for binary data, long enough.
  func verdict(_ bytes: UnsafeRawBufferPointer) -> SoftMagicScreen.Verdict {
    var strongRules: [Int32] = []
    return verdict(bytes, strongRules: &strongRules)
  }

  /// ``verdict(_:)``, and the tests whose rules a ``SoftMagicScreen/Verdict/strongRules(onResidual:)``
  /// verdict adds.
  private func verdict(
    _ bytes: UnsafeRawBufferPointer, strongRules: inout [Int32]
  ) -> SoftMagicScreen.Verdict {
    guard bytes.count >= screen.minimumLength, BinaryContent.looksBinaryToLibmagic(bytes) else {
      return .wholeDatabase
    }
    return screen.verdict(bytes, strongRules: &strongRules)
  }
}

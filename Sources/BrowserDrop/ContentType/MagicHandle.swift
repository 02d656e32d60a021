internal import CMagic
import Synchronization

/// One libmagic cookie and the lock that serialises its use.
final class MagicHandle: Sendable {
  /// `@unchecked Sendable`: the pointer is only dereferenced (by libmagic) while `cookie` is
  /// locked, and closed once, in `deinit`.
  private struct Cookie: @unchecked Sendable {
    let pointer: OpaquePointer
  }

  private let cookie: Mutex<Cookie>
  /// The database memory the cookie reads in place, kept until the cookie is closed.
  private let database: (any MagicDatabaseMemory)?

  /// Opens a cookie and loads the database into it: from `database` when given
  /// (`magic_load_buffers`, which reads the mapping in place), else from `databasePath`
  /// (`magic_load`; `nil` for the system database).
  init(
    flags: Int32, databasePath: String?, database: (any MagicDatabaseMemory)?
  ) throws(BrowserDropError) {
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
        // libmagic names a database loaded from memory `buffer'; say which one it was.
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
    identify(bytes) { String(cString: $0) }
  }

  /// `read` applied to libmagic's answer for `bytes` (valid only during the call), or `nil`
  /// when libmagic reports an error; waits while another thread uses the handle
  /// (`magic_buffer`).
  func identify<T: Sendable>(
    _ bytes: UnsafeRawBufferPointer, _ read: (UnsafePointer<CChar>) -> T
  ) -> T? {
    cookie.withLock { Self.identify(bytes, with: $0.pointer, read) }
  }

  /// Like ``identify(_:_:)`` but returns `.none` at once when the handle is busy.
  func identifyIfFree<T: Sendable>(
    _ bytes: UnsafeRawBufferPointer, _ read: (UnsafePointer<CChar>) -> T
  ) -> T?? {
    cookie.withLockIfAvailable { Self.identify(bytes, with: $0.pointer, read) }
  }

  private static func identify<T: Sendable>(
    _ bytes: UnsafeRawBufferPointer, with cookie: OpaquePointer,
    _ read: (UnsafePointer<CChar>) -> T
  ) -> T? {
    // An empty buffer may have no base address; libmagic wants a pointer anyway.
    withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1) { spare in
      magic_buffer(cookie, bytes.baseAddress ?? UnsafeRawPointer(spare.baseAddress!), bytes.count)
        .map(read)
    }
  }
}

/// A few handles on one database, used in turn so sniffs on different threads rarely wait.
final class MagicHandles: Sendable {
  /// The handles.
  let handles: [MagicHandle]
  private let next = Atomic<Int>(0)

  /// Uses `handles` (at least one).
  init(_ handles: [MagicHandle]) {
    precondition(!handles.isEmpty)
    self.handles = handles
  }

  /// `read` applied to libmagic's answer from the first free handle, or from the next one in
  /// turn (waiting for it) when all are busy; `nil` when libmagic reports an error.
  func identify<T: Sendable>(
    _ bytes: UnsafeRawBufferPointer, _ read: (UnsafePointer<CChar>) -> T
  ) -> T? {
    let start = next.wrappingAdd(1, ordering: .relaxed).oldValue & Int.max
    for offset in 0..<handles.count {
      if let answer = handles[(start + offset) % handles.count].identifyIfFree(bytes, read) {
        return answer
      }
    }
    return handles[start % handles.count].identify(bytes, read)
  }

  /// `read` applied to libmagic's answer from the first free handle; `nil` at once when every
  /// handle is busy, and when libmagic reports an error (the caller then asks again where it
  /// may wait, as ``identify(_:_:)``'s callers do).
  func identifyWithoutWaiting<T: Sendable>(
    _ bytes: UnsafeRawBufferPointer, _ read: (UnsafePointer<CChar>) -> T
  ) -> T? {
    let start = next.wrappingAdd(1, ordering: .relaxed).oldValue & Int.max
    for offset in 0..<handles.count {
      if let answer = handles[(start + offset) % handles.count].identifyIfFree(bytes, read) {
        return answer
      }
    }
    return nil
  }
}

/// Memory holding a compiled magic database that libmagic reads in place
/// (`magic_load_buffers`): it must outlive every cookie loaded from it.
protocol MagicDatabaseMemory: AnyObject, Sendable {
  /// The first byte.
  var base: UnsafeMutableRawPointer { get }
  /// The length in bytes.
  var size: Int { get }
  /// How messages name the database.
  var path: String { get }
}

/// A compiled database built in memory (``SoftMagicScreen/residualDatabase``).
///
/// `@unchecked Sendable`: the bytes are written once, in `init`, then only read by libmagic, and
/// freed in `deinit` after every cookie holding them has closed.
final class BuiltDatabase: MagicDatabaseMemory, @unchecked Sendable {
  let base: UnsafeMutableRawPointer
  let size: Int
  let path: String

  /// Copies `bytes`; `path` names the database in messages.
  init(_ bytes: [UInt8], path: String) {
    let base = UnsafeMutableRawPointer.allocate(byteCount: max(1, bytes.count), alignment: 16)
    bytes.withUnsafeBytes { base.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
    self.base = base
    size = bytes.count
    self.path = path
  }

  deinit { base.deallocate() }
}

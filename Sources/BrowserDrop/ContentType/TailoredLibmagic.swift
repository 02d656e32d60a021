internal import CMagic
import Glibc
import Synchronization

/// libmagic on databases made for one upload: the small database the screen picks, with the
/// strong rules that may match copied in their places (``SoftMagicScreen/StrongRule``).
///
/// A few slots, one per handle the sniffer has, each keep the last database they made and a
/// handle loaded from it, so that uploads of one format (a camera's photos) find theirs ready:
/// libmagic's walk stops at the format's rule, and making the database again each time (copying
/// the small one, loading a new handle) cost more than that walk of the whole database did. The
/// added rules are read from the database file with `pread`, never through the mapping, so the
/// mapping's pages stay out of the resident set; each slot's memory stays mapped for reuse (the
/// largest database, the weak and unscreened rules' with rules added, is about 1 MiB).
final class TailoredLibmagic: Sendable {
  /// What a slot's database holds: the small database and the tests whose rules were added.
  struct Key: Equatable, Sendable {
    let strongRules: [Int32]
    let onResidual: Bool
  }

  /// One database made for an upload, and a handle on it. The handle is closed before the
  /// memory is written again or unmapped.
  ///
  /// `@unchecked Sendable`: the memory is only touched under the slot's lock.
  private struct Slot: @unchecked Sendable {
    var key: Key?
    var handle: MagicHandle?
    var memory: UnsafeMutableRawPointer?
    var capacity = 0
  }

  /// A slot behind its lock (a `Mutex` cannot be an array's element).
  private final class Locked: Sendable {
    let slot = Mutex(Slot())
  }

  private enum Attempt<T> {
    case skipped
    case answered(T?)
  }

  private let slots: [Locked]
  private let next = Atomic<Int>(0)
  private let screen: SoftMagicScreen
  /// The whole database, whose file the added rules are read from.
  private let whole: MappedDatabase
  /// The two small databases (``SoftMagicScreen/residualDatabase`` and its unscreened part).
  private let residual: any MagicDatabaseMemory
  private let unscreened: any MagicDatabaseMemory
  private let flags: Int32

  /// `slotCount` slots for `screen`'s databases made from `residual` or `unscreened` and rules
  /// of `whole`, with handles opened with `flags`.
  init(
    slotCount: Int, screen: SoftMagicScreen, whole: MappedDatabase,
    residual: any MagicDatabaseMemory, unscreened: any MagicDatabaseMemory, flags: Int32
  ) {
    slots = (0..<max(1, slotCount)).map { _ in Locked() }
    self.screen = screen
    self.whole = whole
    self.residual = residual
    self.unscreened = unscreened
    self.flags = flags
  }

  deinit {
    for locked in slots {
      locked.slot.withLock { slot in
        slot.handle = nil
        if let memory = slot.memory { munmap(memory, slot.capacity) }
      }
    }
  }

  /// `read` applied to libmagic's answer for `bytes` from the database `key` names; `nil` when
  /// it cannot be made or libmagic reports an error. Uses a free slot that holds it already,
  /// else makes it in a free slot, else waits for one.
  func identify<T: Sendable>(
    _ bytes: UnsafeRawBufferPointer, key: Key, _ read: (UnsafePointer<CChar>) -> T
  ) -> T? {
    let start = next.wrappingAdd(1, ordering: .relaxed).oldValue & Int.max
    let order = slots.indices.map { slots[(start + $0) % slots.count] }
    for reuseOnly in [true, false] {
      for locked in order {
        let attempt = locked.slot.withLockIfAvailable { slot -> Attempt<T> in
          if reuseOnly && slot.key != key { return .skipped }
          return .answered(identify(bytes, key: key, in: &slot, read))
        }
        if case .answered(let answer)? = attempt { return answer }
      }
    }
    return order[0].slot.withLock { identify(bytes, key: key, in: &$0, read) }
  }

  private func identify<T: Sendable>(
    _ bytes: UnsafeRawBufferPointer, key: Key, in slot: inout Slot,
    _ read: (UnsafePointer<CChar>) -> T
  ) -> T? {
    if slot.key != key || slot.handle == nil {
      slot.handle = nil
      slot.key = nil
      guard let database = make(key, in: &slot),
        let handle = try? MagicHandle(flags: flags, databasePath: nil, database: database)
      else { return nil }
      slot.handle = handle
      slot.key = key
    }
    return slot.handle?.identify(bytes, read)
  }

  /// Writes the database `key` names into the slot's memory (mapped anew only when it grows).
  private func make(_ key: Key, in slot: inout Slot) -> (any MagicDatabaseMemory)? {
    let entry = CompiledMagic.entrySize
    let small = key.onResidual ? residual : unscreened
    let plan = screen.tailoredDatabase(strongRules: key.strongRules, onResidual: key.onResidual)
    let size = (1 + plan.walked + plan.named) * entry
    if slot.capacity < size {
      if let memory = slot.memory { munmap(memory, slot.capacity) }
      slot.memory = nil
      slot.capacity = 0
      let capacity = (size + 0xFFFF) & ~0xFFFF
      guard
        let memory = mmap(
          nil, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
        memory != MAP_FAILED
      else { return nil }
      slot.memory = memory
      slot.capacity = capacity
    }
    guard let memory = slot.memory else { return nil }
    memory.copyMemory(from: small.base, byteCount: entry)
    memory.storeBytes(of: UInt32(plan.walked).littleEndian, toByteOffset: 8, as: UInt32.self)
    memory.storeBytes(of: UInt32(plan.named).littleEndian, toByteOffset: 12, as: UInt32.self)
    var cursor = memory + entry
    for piece in plan.pieces {
      switch piece {
      case .small(let first, let count):
        cursor.copyMemory(from: small.base + (1 + first) * entry, byteCount: count * entry)
        cursor += count * entry
      case .whole(let first, let count):
        guard readFully(into: cursor, count: count * entry, at: (1 + first) * entry) else {
          return nil
        }
        cursor += count * entry
      }
    }
    return BorrowedDatabase(base: memory, size: size, path: small.path)
  }

  /// Reads `count` bytes of the whole database's file at `offset` (`pread`).
  private func readFully(into target: UnsafeMutableRawPointer, count: Int, at offset: Int) -> Bool {
    var done = 0
    while done < count {
      let read = pread(whole.descriptor, target + done, count - done, off_t(offset + done))
      if read < 0 && errno == EINTR { continue }
      guard read > 0 else { return false }
      done += read
    }
    return true
  }
}

/// A database in memory that a ``TailoredLibmagic`` slot owns; the slot closes the handle
/// holding this before it writes or unmaps the memory.
///
/// `@unchecked Sendable`: only libmagic reads the memory, under the handle's lock.
private final class BorrowedDatabase: MagicDatabaseMemory, @unchecked Sendable {
  let base: UnsafeMutableRawPointer
  let size: Int
  let path: String

  init(base: UnsafeMutableRawPointer, size: Int, path: String) {
    self.base = base
    self.size = size
    self.path = path
  }
}

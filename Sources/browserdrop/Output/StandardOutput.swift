import BrowserDropSystem
import CBrowserDropLinux
import Glibc
import Synchronization

/// Writes whole pieces of text to standard output or standard error, in the order they were
/// given, from a writer thread of its own.
///
/// `write` only queues: events are reported on the server's event loop (see
/// `BrowserDropServer.connectionExecutor`), which must never wait for a slow reader of a pipe or
/// a terminal. The writer takes everything queued at once, so a busy session costs one `write(2)`
/// per burst rather than one per line and one thread wake-up per line.
final class StandardOutput: Sendable {
  /// Standard output.
  static let shared = StandardOutput(descriptor: STDOUT_FILENO, writer: .process)
  /// Standard error.
  static let error = StandardOutput(descriptor: STDERR_FILENO, writer: .process)

  private let descriptor: Int32
  private let writer: OutputWriter

  init(descriptor: Int32, writer: OutputWriter) {
    self.descriptor = descriptor
    self.writer = writer
  }

  /// Queues `text`; it is written whole, after everything queued before it on either stream.
  /// A closed reader (`EPIPE`) drops it.
  func write(_ text: String) {
    writer.enqueue(Array(text.utf8), to: descriptor)
  }

  /// Queues `text` followed by a newline.
  func line(_ text: String) {
    var bytes = Array(text.utf8)
    bytes.append(UInt8(ascii: "\n"))
    writer.enqueue(bytes, to: descriptor)
  }

  /// Returns once everything queued so far has been written (or refused by a closed reader).
  /// Call it before the process exits.
  func flush() {
    writer.flush()
  }
}

/// The thread that writes queued text to its descriptors, in order.
///
/// After each round of writes it lets further text gather for at most
/// ``OutputWriter/gatheringInterval`` before the next round, so a stream of events costs at most
/// a few hundred wake-ups a second however many lines it has; a line that comes after a quiet
/// spell is written at once.
final class OutputWriter: @unchecked Sendable {
  /// The writer shared by standard output and standard error, so lines on the two keep their
  /// order on a terminal.
  static let process = OutputWriter()

  /// How long the writer lets text gather after a round of writes.
  static let gatheringInterval: Duration = .milliseconds(2)

  private struct Piece {
    var descriptor: Int32
    var bytes: [UInt8]
  }

  // Guarded by `condition`'s lock.
  private let condition = ThreadCondition()
  private var queue: [Piece] = []
  private var waiting = false
  /// Pieces queued so far, for `flush`.
  private var enqueuedCount: UInt64 = 0
  // Guarded by `drained`'s lock: pieces written (or dropped) so far.
  private var writtenCount: UInt64 = 0
  private let drained = ThreadCondition()

  /// Whether the writer thread runs; without it (the process could make no thread) each piece is
  /// written by the caller, so output is slower but never lost.
  private let threaded = Atomic(true)

  init() {
    do {
      try SystemThread.start(name: "bd-output") { [self] in run() }
    } catch {
      threaded.store(false, ordering: .relaxed)
    }
  }

  func enqueue(_ bytes: [UInt8], to descriptor: Int32) {
    guard threaded.load(ordering: .relaxed) else {
      Self.writeAll(bytes, to: descriptor)
      return
    }
    condition.lock()
    queue.append(Piece(descriptor: descriptor, bytes: bytes))
    enqueuedCount += 1
    let wake = waiting
    waiting = false
    condition.unlock()
    if wake { condition.signal() }
  }

  func flush() {
    condition.lock()
    let target = enqueuedCount
    condition.unlock()
    drained.lock()
    while writtenCount < target { drained.wait() }
    drained.unlock()
  }

  private func run() {
    var round: [Piece] = []
    while true {
      condition.lock()
      while queue.isEmpty {
        waiting = true
        condition.wait()
      }
      waiting = false
      swap(&round, &queue)  // the two arrays keep their capacity from round to round
      condition.unlock()

      Self.write(round)

      drained.lock()
      writtenCount += UInt64(round.count)
      drained.unlock()
      round.removeAll(keepingCapacity: true)
      drained.broadcast()
      Syscall.sleep(Self.gatheringInterval)
    }
  }

  /// Writes `pieces` in order, each run of consecutive pieces for one descriptor in one pass.
  private static func write(_ pieces: [Piece]) {
    var index = 0
    while index < pieces.count {
      let descriptor = pieces[index].descriptor
      var bytes: [UInt8] = []
      while index < pieces.count && pieces[index].descriptor == descriptor {
        bytes += pieces[index].bytes
        index += 1
      }
      writeAll(bytes, to: descriptor)
    }
  }

  private static func writeAll(_ bytes: [UInt8], to descriptor: Int32) {
    bytes.withUnsafeBytes { buffer in
      var offset = 0
      while offset < buffer.count {
        let written: Int?
        do {
          written = try Syscall.nonBlocking("write") {
            Glibc.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
          }
        } catch {
          return  // EPIPE and the like: nobody reads any more
        }
        if let written {
          offset += written
        } else {  // a descriptor inherited in non-blocking mode
          var ready = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
          _ = poll(&ready, 1, -1)
        }
      }
    }
  }
}

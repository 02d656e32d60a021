import BrowserDropSystem
import CBrowserDropLinux
import Glibc
import Synchronization

/// Moves a request body from a socket into a file in bounded steps, so memory stays flat
/// whatever the size. Large bodies go socket → pipe → file with `splice(2)`, never through
/// user space; small ones (and file systems that cannot splice) through one bounded buffer.
struct BodyTransfer {
  /// Bodies at least this large are spliced.
  static let spliceThreshold = 1 << 20
  /// The pipe's capacity, and the most one splice moves.
  static let pipeCapacity = 1 << 20
  /// The copy buffer's size.
  static let bufferSize = 256 * 1024

  /// How much a durable body's splice lets pile up before handing it to the disk.
  static let writeBehindStep = 8 << 20

  let socket: Socket
  let file: Int32
  let idleTimeout: IdleTimeout
  let counter: ProgressCounter
  /// Where in `file` the moved bytes start.
  var fileOffset = 0
  /// The body will be flushed (`fdatasync`) once complete: start writing spliced bytes to disk
  /// every ``writeBehindStep`` while the rest arrives, so the flush finds little left to do and
  /// the disk works while the network does (`sync_file_range` with `SYNC_FILE_RANGE_WRITE`,
  /// which queues the writes and does not wait for them).
  var writesBehind = false
  /// Where to stop early: once `counter` reaches it, `move` returns as if the peer had closed.
  /// `nil` moves every byte asked for.
  var limit: TransferLimit?

  /// Bytes `move` may still take before `limit`, at most `wanted`; 0 means stop here.
  private func allowed(_ wanted: Int) -> Int {
    guard let limit else { return wanted }
    return min(wanted, max(0, limit.bytes - counter.bytes))
  }

  /// Moves `count` bytes. Returns `false` when the peer closed first; throws
  /// `CancellationError` when the task is cancelled before the last byte.
  func move(_ count: Int) async throws -> Bool {
    guard count > 0 else { return true }
    if count >= Self.spliceThreshold, let pipe = try? Pipe(capacity: Self.pipeCapacity) {
      defer { pipe.close() }
      switch try await splice(count, through: pipe) {
      case .done(let complete): return complete
      case .unsupported(let moved): return try await copy(count - moved)
      }
    }
    return try await copy(count)
  }

  private enum SpliceOutcome {
    case done(complete: Bool)
    /// The file system refused splicing before anything was lost; `moved` bytes are in the file.
    case unsupported(moved: Int)
  }

  private func splice(_ count: Int, through pipe: Pipe) async throws -> SpliceOutcome {
    var moved = 0
    var handedToDisk = 0
    while moved < count {
      // A fast sender may never make the loop wait: check here, so that a transfer stopped
      // midway (a refused upload, a cancelled session) stops at once.
      try Task.checkCancellation()
      let want = allowed(min(count - moved, pipe.capacity))
      if want == 0 { return .done(complete: false) }
      let inPipe = try Syscall.nonBlocking("splice") {
        cbd_splice(socket.fd, nil, pipe.write, nil, want, 1)
      }
      guard let inPipe else {
        try await Reactor.shared.wait(
          for: .readable, on: socket.fd, deadline: idleTimeout.fromNow)
        continue
      }
      if inPipe == 0 { return .done(complete: false) }
      let drained = try Self.drain(pipe, inPipe, into: file)
      if drained < inPipe {
        // This file system cannot take spliced pages: copy what sits in the pipe, then the rest.
        guard moved == 0 && drained == 0 else { throw SystemError(call: "splice", code: EINVAL) }
        try drainByCopy(pipe, inPipe)
        counter.add(inPipe)
        return .unsupported(moved: inPipe)
      }
      moved += inPipe
      counter.add(inPipe)
      if writesBehind && moved - handedToDisk >= Self.writeBehindStep {
        // Advice only: a refusal leaves everything to the final flush, as without it.
        _ = cbd_start_writeback(
          file, Int64(fileOffset + handedToDisk), Int64(moved - handedToDisk))
        handedToDisk = moved
      }
    }
    return .done(complete: true)
  }

  /// Splices `count` bytes from the pipe into `file`; returns fewer only when the file system
  /// refuses splicing (EINVAL).
  private static func drain(_ pipe: Pipe, _ count: Int, into file: Int32) throws(SystemError) -> Int
  {
    var drained = 0
    while drained < count {
      do throws(SystemError) {
        drained += try Syscall.blocking("splice") {
          cbd_splice(pipe.read, nil, file, nil, count - drained, 0)
        }
      } catch  where error.code == EINVAL {
        return drained
      }
    }
    return drained
  }

  private func drainByCopy(_ pipe: Pipe, _ count: Int) throws(SystemError) {
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: count, alignment: 16)
    defer { buffer.deallocate() }
    var filled = 0
    while filled < count {
      filled += try Syscall.blocking("read") {
        Glibc.read(pipe.read, buffer.baseAddress! + filled, count - filled)
      }
    }
    try Self.writeAll(file, UnsafeRawBufferPointer(buffer))
  }

  private func copy(_ count: Int) async throws -> Bool {
    let capacity = min(Self.bufferSize, count)
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 16)
    defer { buffer.deallocate() }
    var moved = 0
    while moved < count {
      try Task.checkCancellation()
      let want = allowed(min(capacity, count - moved))
      if want == 0 { return false }
      let got = try await socket.read(
        into: UnsafeMutableRawBufferPointer(rebasing: buffer[..<want]),
        deadline: idleTimeout.fromNow)
      if got == 0 { return false }
      try Self.writeAll(file, UnsafeRawBufferPointer(rebasing: buffer[..<got]))
      moved += got
      counter.add(got)
    }
    return true
  }

  /// Writes all of `bytes` to `fd`.
  static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(SystemError) {
    var offset = 0
    while offset < bytes.count {
      offset += try Syscall.blocking("write") {
        Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
      }
    }
  }
}

/// A non-blocking pipe, the middle of a splice.
struct Pipe {
  let read: Int32
  let write: Int32
  let capacity: Int

  init(capacity wanted: Int) throws(SystemError) {
    var fds: [Int32] = [0, 0]
    try Syscall.blocking("pipe2") { cbd_pipe(&fds) }
    read = fds[0]
    write = fds[1]
    // The kernel may grant less than asked (pipe-max-size); use what it gives.
    let granted = cbd_set_pipe_size(write, Int32(wanted))
    capacity = granted > 0 ? Int(granted) : 64 * 1024
  }

  func close() {
    Glibc.close(read)
    Glibc.close(write)
  }
}

/// A byte count a transfer stops at, set from another task while it runs (a released upload
/// takes what the kernel already holds for it, then stops).
final class TransferLimit: Sendable {
  private let value = Atomic(Int.max)

  var bytes: Int { value.load(ordering: .acquiring) }

  func set(_ bytes: Int) { value.store(bytes, ordering: .releasing) }
}

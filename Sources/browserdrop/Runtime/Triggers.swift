import BrowserDrop
import BrowserDropSystem
import CBrowserDropLinux
import Glibc
import Synchronization

/// What asks the command to finish or stop.
enum Trigger: Sendable, Equatable {
  /// A line on standard input (Enter).
  case enter
  /// A signal, for example `SIGINT` or `SIGTERM`.
  case signal(Int32)
}

/// Turns signals and lines on standard input into one queue of triggers, read with `next()`.
///
/// Signals are taken over from their default action by a handler that writes each one's number
/// to a pipe, read by a dedicated thread; standard input is read by another. Nothing blocks the
/// cooperative pool, and no signal is lost whichever thread the kernel delivers it to (a
/// `DispatchSource` signal source on Linux relies on every thread blocking the signal, which the
/// main thread, parked by `dispatch_main` with an empty mask, does not: it lost SIGINTs).
/// End of input is ignored: under systemd or in a pipe stdin may be empty.
final class Triggers: Sendable {
  private struct Queue {
    var pending: [Trigger] = []
    var waiter: CheckedContinuation<Trigger?, Never>?
  }

  private let queue = Mutex(Queue())

  /// Routes `signals` to this queue (once per process) and, when asked, lines on standard input.
  /// Throws when the signal pipe or a thread can't be made (the process is out of descriptors or
  /// threads).
  init(signals: [Int32], readsStandardInput: Bool) throws(SystemError) {
    let pipe = signals.withUnsafeBufferPointer { numbers in
      cbd_route_signals_to_pipe(numbers.baseAddress, Int32(numbers.count))
    }
    guard pipe >= 0 else { throw SystemError.last("pipe2") }
    try SystemThread.start(name: "bd-signals") { [weak self] in
      var byte: UInt8 = 0
      while (try? Syscall.blocking("read", { read(pipe, &byte, 1) })) == 1 {
        self?.push(.signal(Int32(byte)))
      }
    }
    if readsStandardInput {
      try SystemThread.start(name: "bd-stdin") { [weak self] in
        while readLine(strippingNewline: true) != nil {
          self?.push(.enter)
        }
      }
    }
  }

  /// The next trigger, waiting for one; `nil` when the calling task is cancelled.
  /// One task at a time may wait.
  func next() async -> Trigger? {
    await withTaskCancellationHandler {
      await withCheckedContinuation { (continuation: CheckedContinuation<Trigger?, Never>) in
        let ready: Trigger?? = queue.withLock { queue in
          if Task.isCancelled { return .some(nil) }
          if !queue.pending.isEmpty { return queue.pending.removeFirst() }
          queue.waiter = continuation
          return .none
        }
        if let ready { continuation.resume(returning: ready) }
      }
    } onCancel: {
      let waiter = queue.withLock { queue in
        defer { queue.waiter = nil }
        return queue.waiter
      }
      waiter?.resume(returning: nil)
    }
  }

  private func push(_ trigger: Trigger) {
    let waiter = queue.withLock { queue -> CheckedContinuation<Trigger?, Never>? in
      if let waiter = queue.waiter {
        queue.waiter = nil
        return waiter
      }
      queue.pending.append(trigger)
      return nil
    }
    waiter?.resume(returning: trigger)
  }
}

import Dispatch
import Foundation
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
/// Signals are taken over from their default action and delivered by `DispatchSource`s on a
/// private queue; standard input is read by a dedicated thread, so nothing blocks the
/// cooperative pool. End of input is ignored: under systemd or in a pipe stdin may be empty.
final class Triggers: @unchecked Sendable {
  private struct Queue {
    var pending: [Trigger] = []
    var waiter: CheckedContinuation<Trigger?, Never>?
  }

  private let queue = Mutex(Queue())
  // Written once in init; kept only so the sources stay alive.
  private var sources: [any DispatchSourceSignal] = []

  init(signals: [Int32], readsStandardInput: Bool) {
    let dispatchQueue = DispatchQueue(label: "browserdrop.signals")
    sources = signals.map { number in
      signal(number, SIG_IGN)
      let source = DispatchSource.makeSignalSource(signal: number, queue: dispatchQueue)
      source.setEventHandler { [weak self] in self?.push(.signal(number)) }
      source.resume()
      return source
    }
    if readsStandardInput {
      let thread = Thread { [weak self] in
        while readLine(strippingNewline: true) != nil {
          self?.push(.enter)
        }
      }
      thread.name = "browserdrop.stdin"
      thread.start()
    }
  }

  deinit {
    for source in sources { source.cancel() }
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

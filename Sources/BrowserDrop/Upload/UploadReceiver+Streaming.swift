import BrowserDropSystem
import Glibc

/// Step 2 of receiving an upload: the body from the socket into the partial file.
extension UploadReceiver {
  /// How often a kept upload of a store that outlives the process (the kiosk's) is made
  /// durable and recorded while it arrives: what a power cut can cost it, at most.
  static let checkpointInterval = Duration.seconds(10)

  /// Streams the body into `fd`. When the session sniffs content, the first bytes (up to
  /// 64 KiB, or the whole body when smaller) go in first; libmagic then reads them on the
  /// blocking pool while the rest keeps arriving, and a refusal stops the transfer there.
  /// Returns what inspection found when it ran during the transfer, `nil` when it is still to
  /// run (a body no longer than the prefix, or no sniffing).
  ///
  /// A resumable upload continues at `start` (its first bytes already in `fd`, where the
  /// sniffer reads them: it always judges the file's own start), and stops when `hold` is
  /// released: after the bytes the kernel had already received for it (they are here, so they
  /// are kept rather than sent again), at once when there are none (a half-open connection).
  /// Meanwhile `checkpoint`, when given, runs on the blocking pool every
  /// ``checkpointInterval`` of the session clock.
  func streamBody(
    into fd: Int32, leftover: UnsafeRawBufferPointer, from start: Int = 0,
    until hold: UploadHold? = nil, checkpoint: (@Sendable () -> Void)? = nil
  ) async throws(BodyFailure) -> ContentInspector.Finding? {
    let size = ticket.upload.size
    do {
      var received = start
      if !leftover.isEmpty {
        let part = UnsafeRawBufferPointer(
          rebasing: leftover[..<min(leftover.count, max(0, size - received))])
        try BodyTransfer.writeAll(fd, part)
        received += part.count
        ticket.counter.add(part.count)
      }
      guard let hold else { return try await streamRest(into: fd, from: received) }
      enum Leg: Sendable {
        case body(ContentInspector.Finding?)
        case released
        case draining
        case checkpointsEnded
      }
      let from = received
      let socket = self.socket
      let counter = ticket.counter
      let clock = services.idleTimeout.clock
      return try await withThrowingTaskGroup(of: Leg.self) { group in
        group.addTask {
          .body(try await self.streamRest(into: fd, from: from, limit: hold.limit))
        }
        if let checkpoint {
          // Ends when the body does (the group cancels it); a checkpoint already running
          // finishes first, so the upload's record is never written after the request ends.
          group.addTask {
            while (try? await clock.sleep(for: Self.checkpointInterval)) != nil {
              if Task.isCancelled { break }
              await BlockingPool.shared.run { checkpoint() }
            }
            return .checkpointsEnded
          }
        }
        group.addTask {
          for await _ in hold.released {}
          if Task.isCancelled { return .released }
          // The count before the queue's length: the limit never lies past what has arrived,
          // so the transfer reaches it without waiting for more.
          let taken = counter.bytes
          var queued: Int32 = 0
          guard ioctl(socket.fd, UInt(FIONREAD), &queued) == 0, queued > 0 else {
            return .released
          }
          hold.limit.set(taken + Int(queued))
          // The transfer may have read those bytes between the two looks and now wait for more
          // that a half-open connection never sends: closing the reading side wakes it, and it
          // reads what the kernel still holds, then stops at the limit or at the end.
          _ = shutdown(socket.fd, Int32(SHUT_RD))
          return .draining
        }
        while let leg = try await group.next() {
          switch leg {
          case .body(let found):
            group.cancelAll()
            return found
          case .released:
            group.cancelAll()
            throw CancellationError()
          case .draining, .checkpointsEnded:
            continue
          }
        }
        throw CancellationError()
      }
    } catch let failure as BodyFailure {
      throw failure
    } catch {
      throw .streaming(error)
    }
  }

  /// The body after what came with the head: `received` bytes of the file are in `fd`.
  private func streamRest(
    into fd: Int32, from received: Int, limit: TransferLimit? = nil
  ) async throws -> ContentInspector.Finding? {
    let size = ticket.upload.size
    let inspector = services.contentInspector
    var received = received
    var transfer = BodyTransfer(
      socket: socket, file: fd, idleTimeout: idleTimeout, counter: ticket.counter)
    transfer.writesBehind = services.configuration.durability
    transfer.limit = limit
    let sniffedPrefix = inspector.sniffs ? min(size, ContentSniffer.prefixLength) : 0
    if received < sniffedPrefix {
      transfer.fileOffset = received
      guard try await transfer.move(sniffedPrefix - received) else {
        throw BodyFailure.connectionLost
      }
      received = sniffedPrefix
    }
    transfer.fileOffset = received
    let remaining = size - received
    guard inspector.sniffs && remaining > 0 else {
      guard try await Self.move(remaining, with: transfer) else {
        throw BodyFailure.connectionLost
      }
      return nil
    }
    switch try await Self.move(
      remaining, with: transfer, whileInspecting: inspector, fd: fd,
      fileExtension: ticket.path.fileExtension)
    {
    case .complete(let found):
      return found
    case .peerClosed:
      throw BodyFailure.connectionLost
    case .refused(let message):
      throw BodyFailure.refusedContent(message, unreadBody: max(0, size - ticket.counter.bytes))
    }
  }

  /// Moves `count` body bytes into the file. A large body moves on the cooperative pool, so that
  /// many at once use every core and the event loop stays free for the small requests (see
  /// `Reactor`). Returns `false` when the peer closed first.
  private static func move(_ count: Int, with transfer: BodyTransfer) async throws -> Bool {
    count >= BodyTransfer.spliceThreshold
      ? try await withTaskExecutorPreference(globalConcurrentExecutor) {
        try await transfer.move(count)
      }
      : try await transfer.move(count)
  }

  /// How a body moved while its first bytes were inspected.
  private enum InspectedBody: Sendable {
    /// Every byte arrived, and inspection accepts the file.
    case complete(ContentInspector.Finding)
    /// The peer closed before the whole body arrived.
    case peerClosed
    /// Inspection refused the file (the message says why); the transfer was stopped there.
    case refused(String)
  }

  /// Moves the `count` bytes after the sniffed prefix (already in `fd`) while the prefix is
  /// inspected on the blocking pool, at the same time. A refusal stops the transfer at once.
  private static func move(
    _ count: Int, with transfer: BodyTransfer, whileInspecting inspector: ContentInspector,
    fd: Int32, fileExtension: String
  ) async throws -> InspectedBody {
    enum Step: Sendable {
      case moved(complete: Bool)
      case inspected(ContentInspector.Finding)
    }
    let executor: (any TaskExecutor)? =
      count >= BodyTransfer.spliceThreshold ? globalConcurrentExecutor : nil
    return try await withThrowingTaskGroup(of: Step.self) { group in
      group.addTask {
        .inspected(
          await BlockingPool.shared.run {
            inspector.inspect(fd: fd, fileExtension: fileExtension)
          })
      }
      group.addTask(executorPreference: executor) {
        .moved(complete: try await transfer.move(count))
      }
      var finding: ContentInspector.Finding?
      while let step = try await group.next() {
        switch step {
        case .inspected(let found):
          if let refusal = found.refusal {
            group.cancelAll()
            return .refused(refusal)
          }
          finding = found
        case .moved(let complete):
          if !complete {
            group.cancelAll()
            return .peerClosed
          }
        }
      }
      // Both children returned: the transfer completed and inspection accepted the file.
      guard let finding else { throw CancellationError() }
      return .complete(finding)
    }
  }
}

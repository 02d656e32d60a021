import Dispatch

/// Runs blocking file-system work (`fsync`, `rename`, directory scans) on a serial queue of its
/// own, so the cooperative pool never waits on the disk.
enum BlockingIO {
  private static let queue = DispatchQueue(label: "browserdrop.blocking-io")

  /// Runs `work` on the queue and returns its result.
  static func run<Value: Sendable>(
    _ work: @escaping @Sendable () throws -> Value
  ) async throws -> Value {
    try await withCheckedThrowingContinuation { continuation in
      queue.async { continuation.resume(with: Result<Value, any Error> { try work() }) }
    }
  }
}

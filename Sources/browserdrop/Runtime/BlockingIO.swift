import BrowserDropSystem

/// The command's lane for blocking file-system work (`fsync`, `rename`, directory scans), so the
/// cooperative pool never waits on the disk.
enum BlockingIO {
  private static let lane = BlockingPool.serial(name: "bd-command-io")

  /// Runs `work` on the lane and returns its result.
  static func run<Value: Sendable>(
    _ work: @escaping @Sendable () throws -> Value
  ) async throws -> Value {
    try await lane.run(work)
  }
}

import BrowserDropSystem

extension BlockingPool {
  /// The library's pool for calls that may block (`fsync`, `statvfs`, libmagic on big buffers).
  /// Four threads: folder flushes of uploads finishing together run side by side, so the device
  /// can merge them.
  static let shared = BlockingPool(name: "bd-io", threads: 4)
}

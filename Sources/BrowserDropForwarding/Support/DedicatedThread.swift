import BrowserDropSystem

/// The forwarding library's blocking lanes, so blocking calls (libsmbclient, `fsync`, big
/// copies) never occupy the cooperative pool's two threads. Each is a serial lane of the system
/// layer: one thread, jobs in order.
enum DedicatedThread {
  /// The thread that owns every libsmbclient call in the process (the library is not
  /// thread-safe, even with one context per thread). Its thread blocks `SIGPIPE`, so a server
  /// that hangs up makes libsmbclient's write fail with `EPIPE` instead of ending the process.
  static let smb = BlockingPool.serial(name: "bd-smb")

  /// Local file copying and `fsync`.
  static let localIO = BlockingPool.serial(name: "bd-local-io")

  /// Reading source files ahead while the SMB thread writes the previous chunk.
  static let readAhead = BlockingPool.serial(name: "bd-read-ahead")
}

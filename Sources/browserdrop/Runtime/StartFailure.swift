import BrowserDrop
import FoundationEssentials
import Glibc

/// Start-up failures worded for the command line: each names the flag that decides it
/// (`--bind`, `--port`, `--staging`) and the value, rather than the library's general sentence.
enum StartFailure {
  /// The staging root could not be created, or its lock file not opened.
  struct Staging: Error {
    /// The folder that failed: the root or one of its parents.
    let path: String
    /// Why.
    let code: Int32
    /// Whether creating a folder failed (rather than writing in it).
    let creating: Bool
  }

  /// The sentence for an error thrown while starting a session with `options`.
  static func message(for error: any Error, options: CommandOptions) -> String {
    let root = options.stagingRoot.path
    if let staging = error as? Staging {
      // ENOENT after the parents were made: the file system refuses new folders there (/proc).
      let reason =
        staging.code == ENOENT && staging.creating
        ? "the file system there doesn't allow new folders" : text(staging.code)
      let place = staging.path == root ? "" : " (at \(staging.path))"
      return staging.creating
        ? "The staging folder \(root) (--staging) can't be created\(place): \(reason)."
        : "The staging folder \(root) (--staging) can't be written: \(reason)."
    }
    guard let failure = error as? BrowserDropError else { return String(describing: error) }
    switch failure {
    case .portUnavailable(let port, let reason):
      if let address = options.bindAddress, reason == String(cString: strerror(EADDRNOTAVAIL)) {
        return "Can't listen on \(address) (--bind): it isn't an address of this computer. "
          + "Leave out --bind to listen on every interface."
      }
      let on = options.bindAddress.map { " on \($0) (--bind)" } ?? ""
      if options.port == 0 {
        return "Can't listen\(on): \(reason)."
      }
      return "Can't listen on port \(port) (--port)\(on): \(reason)."
    case .stagingUnavailable(let path, let reason):
      return "The staging folder \(path) (--staging) can't be used: \(reason)."
    default:
      return failure.description
    }
  }

  private static func text(_ code: Int32) -> String {
    String(cString: strerror(code)).lowercased()
  }
}

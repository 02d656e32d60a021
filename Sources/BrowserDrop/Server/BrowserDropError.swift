/// Errors thrown by `BrowserDropServer`'s methods.
public enum BrowserDropError: Error, Sendable, Hashable, CustomStringConvertible {
  /// The requested port is taken or not permitted.
  case portUnavailable(port: Int, reason: String)
  /// `Configuration.bindAddress` is not an IPv4 or IPv6 literal.
  case invalidBindAddress(String)
  /// The staging root cannot be created or written.
  case stagingUnavailable(path: String, reason: String)
  /// The content-type database (libmagic's) could not be loaded.
  case contentDatabaseUnavailable(String)
  /// The listener could not be set up for another reason.
  case listenFailed(String)
  /// The session was already finished or cancelled.
  case sessionEnded

  /// A sentence a person can act on.
  public var description: String {
    switch self {
    case .portUnavailable(let port, let reason):
      "Can't listen on port \(port): \(reason)."
    case .invalidBindAddress(let text):
      "The bind address \(text) is not an IPv4 or IPv6 address."
    case .stagingUnavailable(let path, let reason):
      "Can't use the staging folder \(path): \(reason)."
    case .contentDatabaseUnavailable(let reason):
      "Can't load the file-type database (libmagic): \(reason)."
    case .listenFailed(let reason):
      "Can't start listening: \(reason)."
    case .sessionEnded:
      "This upload session has already ended."
    }
  }
}

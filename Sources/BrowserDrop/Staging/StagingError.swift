/// Why the staging folder can't be used; the server reports it as
/// `BrowserDropError.stagingUnavailable`.
enum StagingError: Error, Equatable {
  /// The folder at `path` can't be created, claimed or written, for `reason` (a clause).
  case unavailable(path: String, reason: String)
}

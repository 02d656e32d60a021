/// A resumable upload stopped or went on, delivered through `BrowserDropServer.pauses`.
///
/// A stream of its own rather than new `Event` cases, so that a host's exhaustive `switch` over
/// `Event` keeps compiling. Between `.uploadStarted` and the one `.uploadFinished` or
/// `.uploadFailed` that ends it, an upload can pause and resume any number of times; the two
/// streams are each in order, and a paused upload's end always comes after its `.paused`.
public enum PauseEvent: Sendable, Hashable {
  /// The connection was lost (or went quiet, or the session stopped listening); the first
  /// `keptBytes` bytes are on the disk and the client can resume from there until the upload
  /// expires.
  case paused(Upload, keptBytes: Int)
  /// A client continued the upload from `offset`; `progress` counts from there.
  case resumed(Upload, offset: Int)
}

/// How long an upload that was cut off can be resumed, and where its bytes wait meanwhile
/// (`BrowserDropServer.Configuration.resumableUploads`).
public struct ResumableUploads: Sendable, Hashable {
  /// Where cut-off uploads wait to be resumed.
  public enum Scope: Sendable, Hashable {
    /// In the session's incoming folder: `finish()` and `cancel()` remove them, as does
    /// `removeLeftovers` at the next launch.
    case session
    /// In `.browserdrop-resumable/` in the staging root, outliving the session and the process: the next
    /// session on the same staging root (a kiosk's next batch, or the same command started
    /// again after a crash) continues them. One server at a time uses a staging root this way:
    /// `start()` takes a lock on the folder (`flock` on its `.lock`) until `finish()` or
    /// `cancel()`, and fails with `BrowserDropError.stagingUnavailable` naming the folder when
    /// another server holds it. `cancel()` removes the paused uploads and the records of what
    /// its session stored, not those of files earlier sessions handed over.
    case stagingRoot
  }

  /// How long after its last byte arrived a cut-off upload can still be resumed; advertised as
  /// `config.json`'s `resumable.expiresAfter`, in whole seconds.
  public var expiresAfter: Duration
  /// Where cut-off uploads wait.
  public var scope: Scope

  /// Resumable uploads kept `expiresAfter` (24 hours unless told) within `scope`.
  public init(expiresAfter: Duration = .seconds(24 * 60 * 60), scope: Scope = .session) {
    self.expiresAfter = expiresAfter
    self.scope = scope
  }

  /// `expiresAfter` in whole seconds, at least one.
  var expirySeconds: Int {
    max(1, Int(expiresAfter.components.seconds))
  }
}

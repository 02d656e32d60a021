import Glibc
import Synchronization

/// The session's use of content sniffing: what each stored file is, and whether the policy
/// refuses it. `inspect` blocks (it reads the file and runs libmagic), so it runs on the
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
  private let sniffer: ContentSniffer?

  /// Whether `inspect` reads and sniffs the file (and so must run off the cooperative pool).
  var sniffs: Bool { sniffer != nil }

  /// The process's sniffer, loaded once with the system database on first use.
  private static let shared = Mutex<ContentSniffer?>(nil)

  /// Prepares inspection for `policy`; loads libmagic's database (once per process) unless the
  /// policy is `.off`. A missing or broken database fails here, before the server listens.
  static func load(policy: ContentPolicy) async throws(BrowserDropError) -> ContentInspector {
    guard policy.sniffsContent else { return ContentInspector(policy: policy, sniffer: nil) }
    let sniffer = try await BlockingPool.shared.run {
      () throws(BrowserDropError) -> ContentSniffer in
      try shared.withLock { cached throws(BrowserDropError) in
        if let cached { return cached }
        let loaded = try ContentSniffer()
        cached = loaded
        return loaded
      }
    }
    return ContentInspector(policy: policy, sniffer: sniffer)
  }

  /// Inspects the first bytes of the open file `fd` (readable, positioned anywhere).
  func inspect(fd: Int32, fileExtension: String) -> Finding {
    guard let sniffer else { return Finding(mimeType: nil, kind: .other, refusal: nil) }
    let buffer = UnsafeMutableRawBufferPointer.allocate(
      byteCount: ContentSniffer.prefixLength, alignment: 16)
    defer { buffer.deallocate() }
    var filled = 0
    while filled < buffer.count {
      let count = pread(fd, buffer.baseAddress! + filled, buffer.count - filled, off_t(filled))
      if count < 0, errno == EINTR { continue }
      if count <= 0 { break }
      filled += count
    }
    let sniffed = sniffer.sniff(UnsafeRawBufferPointer(rebasing: buffer[..<filled]))
    let refusal = policy.refusal(for: sniffed, fileExtension: fileExtension)
    return Finding(mimeType: sniffed.mimeType, kind: sniffed.kind, refusal: refusal?.message)
  }
}

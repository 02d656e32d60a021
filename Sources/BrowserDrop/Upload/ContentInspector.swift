import BrowserDropSystem
import Glibc
import Synchronization

/// The session's use of content sniffing: what each stored file is, and whether the policy
/// refuses it. `inspect` blocks (it reads the file and runs libmagic), so it runs on the
/// blocking pool.
struct ContentInspector: Sendable {
  /// What inspection found.
  struct Finding: Sendable, Hashable {
    var mimeType: String?
    var kind: ContentKind
    /// Why the policy refuses the file (sent with 400 `unsupported_type`), or `nil`.
    var refusal: String?
  }

  let policy: ContentPolicy
  /// The process's sniffer; `nil` when the policy is `.off`.
  let sniffer: ContentSniffer?

  /// Whether `inspect` reads and sniffs the file (and so must run off the cooperative pool).
  var sniffs: Bool { sniffer != nil }

  /// The process's sniffer, loaded once with the system database on first use.
  private static let shared = Mutex<ContentSniffer?>(nil)

  /// Inspection under `policy` with a given sniffer (`nil`: nothing is sniffed).
  init(policy: ContentPolicy, sniffer: ContentSniffer?) {
    self.policy = policy
    self.sniffer = policy.sniffsContent ? sniffer : nil
  }

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

  /// Inspects the first bytes (up to ``ContentSniffer/prefixLength``) of the open file `fd`
  /// (readable, positioned anywhere; bytes past the prefix may still be arriving). Blocking:
  /// call it on `BlockingPool` only.
  func inspect(fd: Int32, fileExtension: String) -> Finding {
    guard sniffer != nil else { return Finding(mimeType: nil, kind: .other, refusal: nil) }
    assert(
      BlockingPool.shared.runsCurrentThread,
      "libmagic must run on the blocking pool, never on the cooperative pool or the reactor")
    return Self.withPrefix(of: fd) { finding(forPrefix: $0, fileExtension: fileExtension) }
  }

  /// The largest body ``quickFinding(fd:size:fileExtension:)`` sniffs. libmagic's cost on the
  /// small databases grows with the length for some binary data: on 16 KiB, ordinary binary
  /// data takes 5–20 µs, and the worst bodies found (a leading NUL byte, which wakes a weak
  /// rule's byte-by-byte search; 8 KiB of blanks before the first NUL, which a regular
  /// expression walks) 100–200 µs, about what the event loop spends on a small upload anyway.
  /// At 64 KiB those two took 350 and 160 µs.
  static let quickSniffLimit = 16 * 1024

  /// ``inspect(fd:fileExtension:)``'s finding when it comes at once, `nil` otherwise (then call
  /// `inspect` on the blocking pool). It comes at once for a file of at most
  /// ``quickSniffLimit`` bytes (`size`) that this request just wrote (so it is in the page
  /// cache), holding binary data the soft-magic screen clears, when a handle of the small
  /// databases is free. Text, known formats and anything else that needs the whole database
  /// never run here. This spares a small upload the trip to the blocking pool and back, which
  /// costs more than such a sniff.
  func quickFinding(fd: Int32, size: Int, fileExtension: String) -> Finding? {
    guard let sniffer else { return Finding(mimeType: nil, kind: .other, refusal: nil) }
    guard sniffer.residual != nil, size <= Self.quickSniffLimit else { return nil }
    return Self.withPrefix(of: fd, length: size) { prefix in
      sniffer.sniffIfQuick(prefix).map { finding(for: $0, fileExtension: fileExtension) }
    }
  }

  /// Calls `body` with the first bytes (up to `length`, at most ``ContentSniffer/prefixLength``)
  /// of `fd`; a read error gives what was read so far, as the end of the file does.
  private static func withPrefix<T>(
    of fd: Int32, length: Int = ContentSniffer.prefixLength,
    _ body: (UnsafeRawBufferPointer) -> T
  ) -> T {
    let buffer = UnsafeMutableRawBufferPointer.allocate(
      byteCount: max(1, min(length, ContentSniffer.prefixLength)), alignment: 16)
    defer { buffer.deallocate() }
    var filled = 0
    while filled < buffer.count {
      let count = try? Syscall.blocking("pread") {
        pread(fd, buffer.baseAddress! + filled, buffer.count - filled, off_t(filled))
      }
      guard let count, count > 0 else { break }
      filled += count
    }
    return body(UnsafeRawBufferPointer(rebasing: buffer[..<filled]))
  }

  /// The server's decision for a file whose first bytes are `prefix`, stored with
  /// `fileExtension`: libmagic's answer and the policy's verdict. Synchronous and CPU-bound.
  func finding(forPrefix prefix: UnsafeRawBufferPointer, fileExtension: String) -> Finding {
    guard let sniffer else { return Finding(mimeType: nil, kind: .other, refusal: nil) }
    return finding(for: sniffer.sniff(prefix), fileExtension: fileExtension)
  }

  /// The policy's verdict on sniffed content stored with `fileExtension`, as sent to the client
  /// and reported in `ReceivedFile`.
  func finding(for sniffed: SniffResult, fileExtension: String) -> Finding {
    let refusal = policy.refusal(for: sniffed, fileExtension: fileExtension)
    return Finding(mimeType: sniffed.mimeType, kind: sniffed.kind, refusal: refusal?.message)
  }
}

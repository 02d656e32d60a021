import FoundationEssentials

/// The names of durable uploads between `BrowserDropServer.reserve` and their outcome, while an
/// I/O thread flushes their data, gives them their names and flushes their folders. The actor
/// still decides every name: meanwhile an upload of the same path waits for the outcome (so
/// the listing follows the order the names were made in), and one that contradicts a reserved
/// name (a file where it needs a folder, another case of it) is refused as if it were stored.
struct NameReservations {
  /// The reserved names, with the same conflict rules as the listing (`SessionIndex`).
  private var names: SessionIndex
  private var waiters: [String: [CheckedContinuation<Void, Never>]] = [:]

  init(caseInsensitive: Bool) {
    names = SessionIndex(caseInsensitive: caseInsensitive)
  }

  /// Whether an upload of exactly `path` holds it.
  func holds(_ path: UploadPath) -> Bool { names.files[path.value] != nil }

  /// Why `path` contradicts a reserved name, or `nil`.
  func conflict(for path: UploadPath) -> Refusal? { names.conflict(for: path) }

  mutating func reserve(_ path: UploadPath) {
    // A placeholder: the record itself is made when the upload is stored.
    let placeholder = ReceivedFile(
      relativePath: path.value, size: 0, sessionFolder: URL(filePath: "/"), receivedAt: Date(),
      mimeType: nil, kind: .other)
    names.insert(placeholder, at: path)
  }

  /// Waits, in the actor, until the upload holding `path` has its outcome.
  mutating func wait(for path: UploadPath, _ continuation: CheckedContinuation<Void, Never>) {
    waiters[path.value, default: []].append(continuation)
  }

  /// Frees `path`; returns the uploads waiting for it, to be resumed.
  mutating func release(_ path: UploadPath) -> [CheckedContinuation<Void, Never>] {
    _ = names.remove(path.value)
    return waiters.removeValue(forKey: path.value) ?? []
  }
}

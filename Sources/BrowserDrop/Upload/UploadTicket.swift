import Synchronization

/// An admitted upload: what the connection needs to receive and store it.
struct UploadTicket: Sendable {
  let upload: Upload
  let path: UploadPath
  let counter: ProgressCounter
}

/// Bytes received so far by one upload, written by its connection, read by the progress stream
/// and by admission (what uploads in flight still have to write).
final class ProgressCounter: Sendable {
  private let value = Atomic(0)

  var bytes: Int { value.load(ordering: .relaxed) }

  func add(_ count: Int) { value.add(count, ordering: .relaxed) }
}

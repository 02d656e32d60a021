import FoundationEssentials
import Synchronization

/// An admitted upload: what the connection needs to receive and store it.
struct UploadTicket: Sendable {
  let upload: Upload
  let path: UploadPath
  let counter: ProgressCounter
  /// The resumable upload it receives (all or the rest of), `nil` for a plain v1 upload.
  var resumable: ResumableTicket? = nil
}

/// What a connection needs to receive a resumable upload: where it is kept and where it stands.
struct ResumableTicket: Sendable {
  let id: UploadID
  let store: ResumableStore
  /// Bytes already on the disk, where the body goes on (0 for a POST).
  let offset: Int
  /// The request's hold on the upload: released when another request takes it over.
  let hold: UploadHold

  /// The record of this upload, as its store keeps it.
  func record(path: UploadPath, length: Int) -> ResumableStore.Record {
    ResumableStore.Record(
      path: path.value, length: length, offset: offset, boot: ResumableStore.bootID,
      updated: Date().timeIntervalSince1970)
  }
}

/// Bytes received so far by one upload, written by its connection, read by the progress stream
/// and by admission (what uploads in flight still have to write).
final class ProgressCounter: Sendable {
  private let value = Atomic(0)

  var bytes: Int { value.load(ordering: .relaxed) }

  func add(_ count: Int) { value.add(count, ordering: .relaxed) }
}

/// The refusal, sent before the body was read, of the latest request naming each upload id,
/// kept for that id's next `HEAD`, which takes it (`Upload-Refusal`).
///
/// Firefox and WebKit read an answer only once they have sent the whole body, and the server
/// drains at most 8 MiB (2 s) of a body it refused: a refusal of a larger upload reaches them as
/// a dropped connection. The page then asks `HEAD` where the upload stands, and learns the
/// reason there.
struct RecentRefusals {
  /// The most ids kept; the oldest is forgotten first.
  static let capacity = 256

  /// The refusals worth telling: those a client shows as the file's reason, and that come
  /// before the body once the request names an upload (admission: the name is taken, or there
  /// is not enough free space). The request's own checks (size, type, path) come earlier and
  /// are the page's own checks too.
  static let told: Set<ProtocolError> = [.pathConflict, .insufficientStorage]

  private var refusals: [UploadID: (path: UploadPath, error: ProtocolError)] = [:]
  /// The ids of `refusals`, each once, in the order they were refused, oldest first.
  private var order: [UploadID] = []

  /// Remembers that the request for upload `id` of `path` was refused with `error`, when it is
  /// one of `told`.
  mutating func record(_ id: UploadID, path: UploadPath, error: ProtocolError) {
    guard Self.told.contains(error) else { return }
    if refusals.updateValue((path, error), forKey: id) == nil { order.append(id) }
    if order.count > Self.capacity { refusals.removeValue(forKey: order.removeFirst()) }
  }

  /// The refusal remembered for `id` of `path`, forgotten as it is told.
  mutating func take(_ id: UploadID, path: UploadPath) -> ProtocolError? {
    guard let found = refusals[id], found.path == path else { return nil }
    forget(id)
    return found.error
  }

  /// Forgets what was remembered for `id`: a later request of it was admitted.
  mutating func forget(_ id: UploadID) {
    guard refusals.removeValue(forKey: id) != nil else { return }
    order.removeAll { $0 == id }
  }

  /// How many ids are remembered (tests).
  var count: Int { order.count }
}

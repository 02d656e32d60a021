/// The resumable uploads a server knows, and the rules for each request of the extension: pure
/// (time comes in as `now`, holds are opaque), owned by the server actor, which performs what
/// the answers say (interrupting a stale request, waiting, sending events).
///
/// A paused upload reserves what it has yet to write against free space. For
/// `firmReservation` after a pause that brought bytes (a phone's Wi-Fi roam, a locked screen)
/// the reservation is firm: nothing else may take that room. After that, or when nothing has
/// arrived, it is soft: when an upload would be refused for space and would fit without the soft
/// reservations, the least progressed paused uploads stop reserving until it fits
/// (`softReservations`, then `UploadAdmission.reservationsToRelease`). One whose reservation
/// was released keeps its bytes, id, record and expiry; it reserves again only once a request
/// has resumed it and it pauses again (or when a later session finds it in the store: the
/// release is not recorded there).
struct ResumeTable {
  /// One resumable upload.
  struct Entry {
    let path: UploadPath
    /// The whole file's size.
    let length: Int
    /// Bytes on the disk (while a request holds it: where that request started).
    var offset: Int
    /// This session's `Upload` for it, once a request of this session received it; `nil` for
    /// one found in the store at start (a kiosk's earlier batch or process).
    var upload: Upload?
    /// The request receiving it now, if any.
    var hold: UploadHold?
    /// When it expires while paused, on the session clock.
    var expiresAt: Duration
    /// Whether, paused, it reserves what it has yet to write against free space: from each
    /// pause (and for one found in the store) until an upload needs the room.
    var reserves = true
    /// Until when, paused with bytes on the disk, its reservation is firm (session clock).
    var firmUntil = Duration.zero

    /// Whether its reservation may give way at `now`.
    func isSoft(at now: Duration) -> Bool { offset == 0 || now >= firmUntil }
  }

  /// How long after a pause that brought bytes the paused upload's reservation stays firm.
  static let firmReservation = Duration.seconds(600)

  /// What a paused upload reserves against free space: what it has yet to write.
  struct Reservation: Equatable {
    let id: UploadID
    let bytes: Int
  }

  /// Where an upload stands, as `HEAD` answers it.
  enum Standing: Equatable {
    case unknown
    /// The id names an upload of another path.
    case otherPath
    /// Held by a request that must be released first.
    case held
    /// Not held: `offset` of `length` bytes are on the disk.
    case paused(offset: Int, length: Int)
    /// Complete and stored in this session.
    case complete(length: Int)
  }

  /// What `PATCH` may do.
  enum ResumeCheck: Equatable {
    case proceed(Entry.Snapshot)
    case held
    /// Refused; the refusal carries where the upload stands when that helps the client.
    case refuse(Refusal)
  }

  /// A stored upload, remembered until `expiresAt` on the session clock.
  struct Completed {
    let path: UploadPath
    let length: Int
    let expiresAt: Duration
  }

  private(set) var entries: [UploadID: Entry] = [:]
  /// Ids of stored uploads (the newest `completedMemory`, until they expire), so that a client
  /// that lost the `201` learns from `HEAD` that everything arrived rather than sending it
  /// again. With the `.stagingRoot` scope they come from the store too: stored by an earlier
  /// session or process.
  private var completed: [UploadID: Completed] = [:]
  private var completedOrder: [UploadID] = []
  static let completedMemory = 4096

  /// What paused uploads reserve against free space (`id`'s left out): what they have yet to
  /// write, until they expire or their reservation is released.
  func pausedRemaining(excluding id: UploadID? = nil) -> Int {
    reserved(excluding: id) { _ in true }
  }

  /// What the firm reservations add up to at `now` (`id`'s left out): room nothing else takes.
  func firmRemaining(excluding id: UploadID? = nil, now: Duration) -> Int {
    reserved(excluding: id) { !$0.isSoft(at: now) }
  }

  /// The reservations of the paused uploads `counted` picks, summed without the order:
  /// admission asks on every upload, and the order is needed only when one would be refused.
  private func reserved(excluding id: UploadID?, _ counted: @escaping (Entry) -> Bool) -> Int {
    Self.total(reserving(excluding: id).filter { counted($0.value) }.map(Self.reservation))
  }

  /// The paused uploads that reserve room (`id`'s left out), lazily.
  private func reserving(
    excluding id: UploadID?
  ) -> LazyFilterSequence<LazySequence<[UploadID: Entry]>.Elements> {
    entries.lazy.filter { item in
      item.key != id && item.value.hold == nil && item.value.reserves
        && item.value.length > item.value.offset
    }
  }

  private static func reservation(_ item: (key: UploadID, value: Entry)) -> Reservation {
    Reservation(id: item.key, bytes: item.value.length - item.value.offset)
  }

  /// The paused uploads' reservations (`id`'s left out) in the order they give way to an upload
  /// that needs the room: the least progressed first (the smallest fraction of its length on
  /// the disk), then the one paused longest ago (it expires first: one lifetime for all), then
  /// by id, so that the order is total. An upload arriving is not here (admission counts it,
  /// and never releases it), nor is a paused one whose reservation was released.
  func softReservations(excluding id: UploadID? = nil, now: Duration = .zero) -> [Reservation] {
    reserving(excluding: id)
      .filter { $0.value.isSoft(at: now) }
      .sorted(by: Self.givesWayFirst)
      .map(Self.reservation)
  }

  /// What `reservations` add up to, at most `Int.max`.
  static func total(_ reservations: some Sequence<Reservation>) -> Int {
    reservations.reduce(0) { $0.addingSaturated($1.bytes) }
  }

  /// Whether `a` gives way before `b`: `offset / length` compared as `offset × other length`,
  /// at full width (lengths are as large as an `Int` holds).
  private static func givesWayFirst(
    _ a: (key: UploadID, value: Entry), _ b: (key: UploadID, value: Entry)
  ) -> Bool {
    let left = a.value.offset.multipliedFullWidth(by: b.value.length)
    let right = b.value.offset.multipliedFullWidth(by: a.value.length)
    if left.high != right.high { return left.high < right.high }
    if left.low != right.low { return left.low < right.low }
    if a.value.expiresAt != b.value.expiresAt { return a.value.expiresAt < b.value.expiresAt }
    return a.key.value < b.key.value
  }

  /// These paused uploads stop reserving free space (an upload needed the room). Their bytes,
  /// offset, record and expiry stay: `HEAD` answers as before, and a `PATCH` meets the free-space
  /// check like any upload. They reserve again when they pause after a request resumed them.
  mutating func releaseReservations(_ ids: some Sequence<UploadID>) {
    for id in ids where entries[id]?.hold == nil { entries[id]?.reserves = false }
  }

  func standing(_ id: UploadID, path: UploadPath) -> Standing {
    if let done = completed[id] {
      return done.path == path ? .complete(length: done.length) : .otherPath
    }
    guard let entry = entries[id] else { return .unknown }
    guard entry.path == path else { return .otherPath }
    if entry.hold != nil { return .held }
    return .paused(offset: entry.offset, length: entry.length)
  }

  /// The checks of a `PATCH` of `size` bytes at `offset`, in order: known, same path, not held
  /// (else release it first), the offset where the upload stands, the body ending at its length.
  func checkResume(_ id: UploadID, path: UploadPath, offset: Int, size: Int) -> ResumeCheck {
    func refusal(
      _ error: ProtocolError, _ message: String? = nil, at offset: Int?, of length: Int?
    )
      -> ResumeCheck
    {
      var refusal = Refusal(error, message)
      refusal.uploadOffset = offset
      refusal.uploadLength = length
      return .refuse(refusal)
    }
    let otherPath = "That upload id belongs to another path."
    if let done = checkStart(id, path: path) { return .refuse(done) }
    guard let entry = entries[id] else { return refusal(.unknownUpload, at: nil, of: nil) }
    guard entry.path == path else { return refusal(.uploadMismatch, otherPath, at: nil, of: nil) }
    if entry.hold != nil { return .held }
    guard offset == entry.offset else {
      return refusal(.offsetMismatch, at: entry.offset, of: entry.length)
    }
    guard size == entry.length - entry.offset else {
      return refusal(
        .uploadMismatch,
        "The body is \(size) bytes; \(entry.length - entry.offset) remain of the upload.",
        at: entry.offset, of: entry.length)
    }
    return .proceed(
      Entry.Snapshot(upload: entry.upload, length: entry.length, offset: entry.offset))
  }

  /// The refusal of a request that would send upload `id` again when it is stored already
  /// (a POST with its id, or a PATCH): `409 offset_mismatch` saying where it stands, complete,
  /// so a client that lost the `201` asks `HEAD` and sends nothing more; `409 upload_mismatch`
  /// when the id was stored for another path. `nil` when the id is not a stored upload's.
  func checkStart(_ id: UploadID, path: UploadPath) -> Refusal? {
    guard let done = completed[id] else { return nil }
    var refusal =
      done.path == path
      ? Refusal(.offsetMismatch, "The upload is already complete.")
      : Refusal(.uploadMismatch, "That upload id belongs to another path.")
    if done.path == path {
      refusal.uploadOffset = done.length
      refusal.uploadLength = done.length
    }
    return refusal
  }

  /// The hold on `id`, if a request has it.
  func hold(of id: UploadID) -> UploadHold? { entries[id]?.hold }

  /// A new upload of that id starts (a POST): any earlier one of the id is replaced. Returns the
  /// replaced entry's `Upload` (to be ended) when there was one.
  mutating func start(
    _ id: UploadID, path: UploadPath, length: Int, upload: Upload, hold: UploadHold
  )
    -> Upload?
  {
    let replaced = entries[id]?.upload
    forgetCompleted(id)
    entries[id] = Entry(
      path: path, length: length, offset: 0, upload: upload, hold: hold, expiresAt: .zero)
    return replaced
  }

  /// A `PATCH` took the upload.
  mutating func resume(_ id: UploadID, upload: Upload, hold: UploadHold) {
    entries[id]?.upload = upload
    entries[id]?.hold = hold
  }

  /// The request receiving it stopped with `offset` bytes durable, and it reserves what it has
  /// yet to write again. When the request brought bytes (or started the upload), it expires at
  /// `expiresAt` and its reservation is firm until `firmUntil`; a request that brought nothing
  /// changes neither, so requests that send nothing never keep an upload alive or its room held.
  mutating func pause(
    _ id: UploadID, hold: UploadHold, offset: Int, expiresAt: Duration,
    firmUntil: Duration = .zero
  ) {
    guard let entry = entries[id], let current = entry.hold, current === hold else { return }
    let brought = offset > entry.offset
    entries[id]?.hold = nil
    entries[id]?.offset = offset
    if brought || entry.expiresAt == .zero { entries[id]?.expiresAt = expiresAt }
    if brought { entries[id]?.firmUntil = firmUntil }
    entries[id]?.reserves = true
  }

  /// The upload was stored: forgotten, its id remembered as complete until `expiresAt`.
  /// Returns the id no longer remembered to make room, if any (its record goes too).
  mutating func complete(_ id: UploadID, expiresAt: Duration) -> UploadID? {
    guard let entry = entries.removeValue(forKey: id) else { return nil }
    return remember(id, Completed(path: entry.path, length: entry.length, expiresAt: expiresAt))
  }

  /// A stored upload found in the store at start. Returns the id no longer remembered to make
  /// room, if any.
  mutating func recoveredComplete(
    _ id: UploadID, path: UploadPath, length: Int, expiresAt: Duration
  ) -> UploadID? {
    remember(id, Completed(path: path, length: length, expiresAt: expiresAt))
  }

  private mutating func remember(_ id: UploadID, _ done: Completed) -> UploadID? {
    forgetCompleted(id)
    completed[id] = done
    completedOrder.append(id)
    guard completedOrder.count > Self.completedMemory else { return nil }
    let oldest = completedOrder.removeFirst()
    completed.removeValue(forKey: oldest)
    return oldest
  }

  /// Forgets the stored uploads whose time is up and returns their ids. They are remembered in
  /// the order they expire (one lifetime for all; those found at start come first, oldest
  /// first), so this looks at the oldest only: it runs before every request.
  mutating func expireCompleted(now: Duration) -> [UploadID] {
    var expired: [UploadID] = []
    while let oldest = completedOrder.first, let done = completed[oldest], done.expiresAt <= now {
      completedOrder.removeFirst()
      completed.removeValue(forKey: oldest)
      expired.append(oldest)
    }
    return expired
  }

  /// The upload ended without being kept (a refusal, a write failure).
  @discardableResult
  mutating func remove(_ id: UploadID) -> Entry? { entries.removeValue(forKey: id) }

  /// A paused upload found in the store at start.
  mutating func recovered(
    _ id: UploadID, path: UploadPath, length: Int, offset: Int, expiresAt: Duration,
    firmUntil: Duration = .zero
  ) {
    entries[id] = Entry(
      path: path, length: length, offset: offset, upload: nil, hold: nil, expiresAt: expiresAt,
      firmUntil: firmUntil)
  }

  /// Removes the paused uploads whose time is up and returns them.
  mutating func expire(now: Duration) -> [(UploadID, Entry)] {
    let expired = entries.filter { $0.value.hold == nil && $0.value.expiresAt <= now }
    for (id, _) in expired { entries.removeValue(forKey: id) }
    return expired.map { ($0.key, $0.value) }
  }

  /// Every entry, leaving the table empty (the session ended).
  mutating func removeAll() -> [UploadID: Entry] {
    defer { entries = [:] }
    return entries
  }

  private mutating func forgetCompleted(_ id: UploadID) {
    guard completed.removeValue(forKey: id) != nil else { return }
    completedOrder.removeAll { $0 == id }
  }
}

extension ResumeTable.Entry {
  /// What a `PATCH` continues from.
  struct Snapshot: Equatable {
    var upload: Upload?
    var length: Int
    var offset: Int
  }
}

/// A request's hold on a resumable upload; `release()` makes that request stop at once, keeping
/// its bytes (tusd's lock preemption: a request left half-open by a Wi-Fi roam would otherwise
/// keep the upload until its idle timeout). The request watches `released` beside its body and
/// cancels the transfer when it ends.
final class UploadHold: Sendable {
  /// Ends when another request takes the upload over.
  let released: AsyncStream<Void>
  /// Set on release: how far the holding request still reads (what the kernel had buffered).
  let limit = TransferLimit()
  private let signal: AsyncStream<Void>.Continuation

  init() { (released, signal) = AsyncStream.makeStream() }

  /// Asks the holding request to stop.
  func release() { signal.finish() }
}

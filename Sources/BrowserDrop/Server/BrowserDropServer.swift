import BrowserDropSystem
public import FoundationEssentials
import Glibc
import Synchronization

/// One upload session: an HTTP server that serves the upload page and stores what arrives in a
/// staging folder until the host takes it with `finish()` or drops it with `cancel()`.
///
/// The actor alone decides names, conflicts and space; connections ask it before reading a
/// body and again before storing it.
public actor BrowserDropServer {
  /// The configuration the session was created with.
  public nonisolated let configuration: Configuration
  /// Everything that happens in the session, in order, never dropped. Read it with one consumer.
  public nonisolated let events: AsyncStream<Event>
  /// The uploads in flight with their progress, at most about ten lists a second; only the
  /// newest list is kept for a slow reader. An empty list follows the last upload.
  public nonisolated let progress: AsyncStream<[UploadProgress]>

  private enum Phase {
    case idle
    case listening
    case suspended
    case ended
  }

  private struct InFlight {
    let upload: Upload
    let counter: ProgressCounter
  }

  private let eventSink: AsyncStream<Event>.Continuation
  private let progressSink: AsyncStream<[UploadProgress]>.Continuation
  private let staging: StagingFolder
  private let pageBundle: [String: [UInt8]]
  private var phase = Phase.idle
  private var index = SessionIndex(caseInsensitive: false)
  private var inFlight: [UInt64: InFlight] = [:]
  private var nextUploadID: UInt64 = 1
  private var boundPort: Int?
  private var currentAddresses: [Address] = []
  private var listenerTask: Task<Void, Never>?
  private var monitorTask: Task<Void, Never>?
  private var progressTask: Task<Void, Never>?
  private var services: SessionServices?
  private var freeSpace = FreeSpaceEstimate()
  /// The session folder, open from `start()` until the session ends (`StagingFolder.place`).
  private var sessionFD: Int32 = -1

  /// Creates a session; nothing listens until `start()`.
  public init(configuration: Configuration = Configuration()) {
    self.init(configuration: configuration, pageBundle: PageSource.bundledFiles)
  }

  /// A session whose bundled page is `pageBundle` instead of the files embedded from `Page/`:
  /// tests use it to see what a build without them answers (500 `page_missing`).
  init(configuration: Configuration, pageBundle: [String: [UInt8]]) {
    self.pageBundle = pageBundle
    self.configuration = configuration
    (events, eventSink) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
    (progress, progressSink) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    staging = StagingFolder(root: configuration.stagingRoot)
  }

  deinit {
    listenerTask?.cancel()
    monitorTask?.cancel()
    progressTask?.cancel()
  }

  /// The addresses the page can be reached at (empty before `start()`).
  public var addresses: [Address] { currentAddresses }

  /// The port the server listens on, once started.
  public var port: Int? { boundPort }

  /// The session's folder inside `stagingRoot`: complete files only, laid out as sent.
  public nonisolated var sessionFolder: URL { staging.session }

  /// The executor the connections run on: the event loop's one thread, shared by every server
  /// in the process.
  ///
  /// A task that prefers it and reads ``events`` handles each event on that thread, in the same
  /// turn of the loop as the upload that caused it, instead of waking a thread of the
  /// cooperative pool per event:
  ///
  /// ```swift
  /// Task(executorPreference: server.connectionExecutor) {
  ///   for await event in server.events { tally.note(event) }
  /// }
  /// ```
  ///
  /// With thousands of small uploads a second those wake-ups are a large share of the work (the
  /// `browserdrop` command reads its events this way). Keep such handling short and never let it
  /// block — no file or network I/O, no locks held for long — since every connection waits while
  /// it runs; hand anything slower to another task.
  public nonisolated var connectionExecutor: any TaskExecutor { Reactor.shared }

  /// The files that arrived complete, sorted by relative path.
  public var receivedFiles: [ReceivedFile] {
    index.files.values.sorted { $0.relativePath < $1.relativePath }
  }

  /// Creates the staging folder and starts listening. Returns the addresses to show the person.
  /// Calling it again while listening returns the same addresses.
  @discardableResult
  public func start() async throws -> [Address] {
    switch phase {
    case .listening: return currentAddresses
    case .suspended:
      try await resume()
      return currentAddresses
    case .ended: throw BrowserDropError.sessionEnded
    case .idle: break
    }
    // The blocking pool's threads, made here so that a process out of threads gets an error
    // rather than a crash or a stall later.
    do throws(SystemError) {
      try BlockingPool.shared.start()
    } catch {
      throw BrowserDropError.listenFailed(error.description)
    }
    let staging = self.staging
    let (caseInsensitive, partialKind, sessionFD) = try await BlockingPool.shared.run {
      () throws(BrowserDropError) -> (Bool, PartialFile.Kind, Int32) in
      try staging.create()
      let fd: Int32
      do throws(SystemError) {
        fd = try staging.openSession()
      } catch {
        staging.removeAll()
        throw .stagingUnavailable(path: staging.root.path, reason: error.reason)
      }
      return (
        staging.probeCaseInsensitivity(), PartialFile.probeKind(in: staging.incomingPath), fd
      )
    }
    self.sessionFD = sessionFD
    index = SessionIndex(caseInsensitive: caseInsensitive)
    let services: SessionServices
    do {
      services = try await SessionServices.load(
        server: self, configuration: configuration, staging: staging, partialKind: partialKind,
        pageBundle: pageBundle)
    } catch {
      closeSession()
      staging.removeAll()
      throw error
    }
    self.services = services
    do {
      try listen(port: configuration.port, fallback: true)
    } catch {
      closeSession()
      staging.removeAll()
      throw error
    }
    startMonitoringAddresses()
    return currentAddresses
  }

  /// Stops listening and ends every connection; files that arrived are kept. Uploads in flight
  /// fail with `.cancelled` (the bundled page retries them after `resume()`).
  public func suspend() async {
    guard phase == .listening else { return }
    phase = .suspended
    await stopListening()
  }

  /// Listens again on the same port after `suspend()` or `.interrupted`; `addresses` then lists
  /// where the page is. When something else holds the port, it tries again for about a second
  /// before throwing `BrowserDropError.portUnavailable`.
  ///
  /// It returns nothing, so the seed's `case .interrupted: try? await server.resume()` compiles
  /// without a warning (`try?` on a call with a result warns that the result is unused).
  public func resume() async throws {
    switch phase {
    case .listening: return
    case .ended: throw BrowserDropError.sessionEnded
    case .idle:
      try await start()
      return
    case .suspended: break
    }
    guard let port = boundPort else {
      try listen(port: configuration.port, fallback: true)
      return
    }
    // The port was this server's a moment ago, yet a process the host is starting can still
    // hold the old listening socket: `posix_spawn` and `fork` copy every descriptor, and the
    // child drops the close-on-exec ones only when it calls `exec`. Seen as EADDRINUSE in the
    // test suite, which starts processes all the time. Try again briefly before giving up.
    var attempt = 1
    while true {
      let failure: BrowserDropError
      do {
        try listen(port: port, fallback: false)
        return
      } catch {
        failure = error
      }
      guard case .portUnavailable = failure, attempt < Self.relistenAttempts else { throw failure }
      attempt += 1
      try await Task.sleep(for: .milliseconds(50))
      // `suspend`, `finish` or `cancel` may have run meanwhile.
      switch phase {
      case .suspended: continue
      case .listening: return
      case .ended, .idle: throw BrowserDropError.sessionEnded
      }
    }
  }

  /// How often `resume()` tries its old port, 50 ms apart (one second in all).
  private static let relistenAttempts = 20

  /// Ends the session and hands over its folder, or returns `nil` (and removes the folder) when
  /// nothing arrived. The folder is the caller's from then on: the server never touches it again.
  public func finish() async throws -> URL? {
    guard phase != .ended else { throw BrowserDropError.sessionEnded }
    await end()
    let staging = self.staging
    let empty = index.files.isEmpty
    await BlockingPool.shared.run {
      if empty { staging.removeAll() } else { staging.removeIncoming() }
    }
    return empty ? nil : staging.session
  }

  /// Ends the session and deletes everything that arrived.
  public func cancel() async {
    guard phase != .ended else { return }
    await end()
    let staging = self.staging
    await BlockingPool.shared.run { staging.removeAll() }
    index = SessionIndex(caseInsensitive: index.caseInsensitive)
  }

  /// Drops a received file, or a folder and everything in it, so it is not handed over.
  /// Returns the files removed.
  @discardableResult
  public func removeReceivedItem(at relativePath: String) async -> [ReceivedFile] {
    // Split on the "/" scalar, as upload paths are: a combining mark must not hide a separator.
    let segments = relativePath.nfcNormalized.unicodeScalars
      .split(separator: "/").map { String(String.UnicodeScalarView($0)) }
    let removed = index.remove(segments.joined(separator: "/"))
    let staging = self.staging
    let paths = removed.map(\.relativePath)
    await BlockingPool.shared.run { for path in paths { staging.remove(relativePath: path) } }
    return removed
  }

  /// Deletes session folders left in `stagingRoot` by sessions that were never finished or
  /// cancelled, and folders handed over by `finish()` that were never moved. Other files in
  /// the staging root are left alone.
  public static func removeLeftovers(
    stagingRoot: URL = Configuration.defaultStagingRoot
  ) {
    StagingFolder.removeLeftovers(in: stagingRoot)
  }

  // MARK: - Listening

  private func listen(port: Int, fallback: Bool) throws(BrowserDropError) {
    guard let services else { throw .sessionEnded }
    // Started here rather than once per process: after `epoll_wait` failed, the loop is gone and
    // `resume()` makes a new one. A process out of descriptors gets an error, not a crash.
    do throws(SystemError) {
      try Reactor.shared.start()
    } catch {
      throw .listenFailed(error.description)
    }
    let listener = try Listener.open(
      address: configuration.bindAddress, port: port, fallback: fallback)
    boundPort = listener.port
    currentAddresses = InterfaceAddresses.current(
      port: listener.port, bindAddress: configuration.bindAddress)
    phase = .listening
    // The listener and its connections run on the event loop (see `Reactor`).
    listenerTask = Task(executorPreference: Reactor.shared) { [weak self] in
      let lost = await services.serve(listener)
      if lost { await self?.listenerLost() }
    }
  }

  private func closeSession() {
    if sessionFD >= 0 { close(sessionFD) }
    sessionFD = -1
  }

  private func listenerLost() {
    guard phase == .listening else { return }
    phase = .suspended
    listenerTask = nil
    eventSink.yield(.interrupted)
  }

  private func stopListening() async {
    let task = listenerTask
    listenerTask = nil
    task?.cancel()
    await task?.value
  }

  private func end() async {
    phase = .ended
    defer { closeSession() }
    monitorTask?.cancel()
    monitorTask = nil
    await stopListening()
    progressTask?.cancel()
    progressTask = nil
    progressSink.finish()
    eventSink.finish()
  }

  private func startMonitoringAddresses() {
    let bindAddress = configuration.bindAddress
    monitorTask = Task { [weak self] in
      while !Task.isCancelled {
        do { try await Task.sleep(for: .seconds(2)) } catch { return }
        guard let port = await self?.boundPort else { return }
        let now = await BlockingPool.shared.run {
          InterfaceAddresses.current(port: port, bindAddress: bindAddress)
        }
        await self?.updateAddresses(now)
      }
    }
  }

  private func updateAddresses(_ addresses: [Address]) {
    guard phase == .listening || phase == .suspended, addresses != currentAddresses else { return }
    currentAddresses = addresses
    eventSink.yield(.addressesChanged(addresses))
  }

  // MARK: - Uploads (asked by connections)

  /// What `admit` decided.
  enum Admission: Sendable {
    case accepted(UploadTicket)
    case refused(Refusal)
    /// The free-space figure is too old to decide with: measure (`statvfs`) and ask again.
    case measureFreeSpace
  }

  /// Whether `size` bytes leave at least `reservedFreeSpace` of `available`. Either can be as
  /// large as an `Int` holds (a 19-digit Content-Length, a reserve of `Int.max`): compared
  /// without overflowing.
  private func fits(_ size: Int, in available: Int) -> Bool {
    let (room, overflow) = available.subtractingReportingOverflow(configuration.reservedFreeSpace)
    return !overflow && size <= room
  }

  /// Decides whether an upload may start: name conflicts, then free space (counting what uploads
  /// in flight still have to write). On success the upload is in flight and `.uploadStarted`
  /// has been sent.
  ///
  /// `freeBytes` is a fresh measurement, or `nil` to decide from the last one when that is
  /// recent and the answer is clear even counting every byte admitted since as written;
  /// otherwise the answer is `.measureFreeSpace`.
  func admit(_ path: UploadPath, size: Int, freeBytes: Int?) -> Admission {
    guard phase == .listening else {
      return .refused(Refusal(.writeFailed, "The session is not accepting uploads."))
    }
    if let conflict = index.conflict(for: path) { return .refused(conflict) }
    let pending = inFlight.values.reduce(0) { $0 + max(0, $1.upload.size - $1.counter.bytes) }
    if let freeBytes {
      freeSpace.record(freeBytes)
      if !fits(size, in: freeBytes - pending) {
        return .refused(Refusal(.insufficientStorage))
      }
    } else {
      guard let estimate = freeSpace.pessimisticEstimate(), fits(size, in: estimate - pending)
      else { return .measureFreeSpace }
    }
    freeSpace.admitted(size)
    let upload = Upload(id: nextUploadID, relativePath: path.value, size: size)
    nextUploadID += 1
    let counter = ProgressCounter()
    inFlight[upload.id] = InFlight(upload: upload, counter: counter)
    eventSink.yield(.uploadStarted(upload))
    startPublishingProgress()
    return .accepted(
      UploadTicket(
        upload: upload, path: path, counter: counter))
  }

  /// Stores a complete upload: checks the name again, moves the file into place and records it.
  /// Returns the record and the folders whose entries changed.
  func store(
    _ ticket: UploadTicket, partial: PartialFile, mimeType: String?, kind: ContentKind
  ) -> Result<(ReceivedFile, [String]), Refusal> {
    guard phase != .ended, inFlight[ticket.upload.id] != nil else {
      return .failure(Refusal(.writeFailed, "The session ended while the file was arriving."))
    }
    if let conflict = index.conflict(for: ticket.path) {
      finishUpload(ticket, failure: .pathConflict)
      return .failure(conflict)
    }
    let changed: [String]
    do {
      changed = try staging.place(partial: partial, at: ticket.path, sessionFD: sessionFD)
    } catch {
      finishUpload(ticket, failure: .writeFailed(error.reason))
      return .failure(Refusal(.writeFailed, "The file couldn't be stored: \(error.reason)."))
    }
    let file = ReceivedFile(
      relativePath: ticket.path.value, size: ticket.upload.size,
      sessionFolder: staging.session, receivedAt: Date(), mimeType: mimeType, kind: kind)
    index.insert(file, at: ticket.path)
    finishUpload(ticket, failure: nil)
    eventSink.yield(.uploadFinished(file))
    return .success((file, changed))
  }

  /// Ends an upload that did not complete: `.uploadFailed` with the reason.
  func abandon(_ ticket: UploadTicket, reason: FailureReason) {
    guard inFlight[ticket.upload.id] != nil else { return }
    finishUpload(ticket, failure: reason)
  }

  private func finishUpload(_ ticket: UploadTicket, failure: FailureReason?) {
    inFlight.removeValue(forKey: ticket.upload.id)
    if let failure { eventSink.yield(.uploadFailed(ticket.upload, failure)) }
  }

  private func startPublishingProgress() {
    guard progressTask == nil else { return }
    progressTask = Task { [weak self] in await self?.publishProgress() }
  }

  private func publishProgress() async {
    while !inFlight.isEmpty {
      let snapshot = inFlight.values
        .sorted { $0.upload.id < $1.upload.id }
        .map { UploadProgress(upload: $0.upload, receivedBytes: $0.counter.bytes) }
      progressSink.yield(snapshot)
      do { try await Task.sleep(for: .milliseconds(100)) } catch { break }
    }
    progressSink.yield([])
    progressTask = nil
  }
}

/// The last `statvfs` of the staging volume, so most uploads are admitted without a system call:
/// within `lifetime` of a measurement, every byte admitted since is counted as already written,
/// which can only underestimate what is free. When that estimate is not clearly enough, the
/// connection measures again.
struct FreeSpaceEstimate {
  static let lifetime = Duration.milliseconds(250)

  private var measured: Int?
  private var measuredAt = ContinuousClock.now
  private var admittedSince = 0

  mutating func record(_ freeBytes: Int) {
    measured = freeBytes
    measuredAt = .now
    admittedSince = 0
  }

  mutating func admitted(_ size: Int) { admittedSince += size }

  func pessimisticEstimate() -> Int? {
    guard let measured, measuredAt.duration(to: .now) < Self.lifetime else { return nil }
    return measured - admittedSince
  }
}

/// An admitted upload: what the connection needs to receive and store it.
struct UploadTicket: Sendable {
  let upload: Upload
  let path: UploadPath
  let counter: ProgressCounter
}

/// Bytes received so far by one upload, written by its connection, read by the progress stream.
final class ProgressCounter: Sendable {
  private let value = Atomic(0)

  var bytes: Int { value.load(ordering: .relaxed) }

  func add(_ count: Int) { value.add(count, ordering: .relaxed) }
}

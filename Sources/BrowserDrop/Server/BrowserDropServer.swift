import BrowserDropSystem
public import FoundationEssentials
import Glibc

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

  /// Resumable uploads pausing and resuming (see `PauseEvent`); empty unless
  /// `Configuration.resumableUploads` is set. The newest 1024 are kept for a slow reader, so a
  /// host that never reads it holds no more than that.
  public nonisolated let pauses: AsyncStream<PauseEvent>

  let eventSink: AsyncStream<Event>.Continuation
  let pauseSink: AsyncStream<PauseEvent>.Continuation
  let progressSink: AsyncStream<[UploadProgress]>.Continuation
  let staging: StagingFolder
  /// What the timing rules read (progress throttle, free-space lifetime, address poll).
  let clock: any SessionClock
  let pageBundle: [String: [UInt8]]
  /// Where the session is in its life, with what exists at that point (`ServerState.swift`).
  var state = ServerState.idle
  var index = SessionIndex(caseInsensitive: false)
  var admission: UploadAdmission
  /// Where cut-off uploads are kept; `nil` when uploads are not resumable.
  let resumableStore: ResumableStore?
  /// The resumable uploads this server knows, paused or arriving (`ResumeTable.swift`).
  var resumeTable = ResumeTable()
  /// The lock on the staging root's store while the session lasts (`ResumableStore.lock()`).
  var storeLock: StoreLock?
  /// Uploads this session stored and the store remembers (the `.stagingRoot` scope): the
  /// records `cancel()` removes, with their files.
  var storedHere: Set<UploadID> = []
  /// The newest of the store's jobs on the blocking pool (`onStore`), and the ids whose files
  /// jobs not yet finished touch (how many jobs each).
  var storeWork: Task<Void, Never>?
  /// `finishHandingOverListener`'s work while the state is `.finishing`: a second call, or
  /// `finish()`, awaits it; `cancel()` cancels it.
  var handingOver: Task<(folder: URL?, handover: ListenerHandover?), any Error>?
  /// How many `finish()` or `finishHandingOverListener` calls wait for `handingOver` (tests
  /// wait for them to be waiting).
  var callsWaitingForHandover = 0
  var pendingStoreIDs: [UploadID: Int] = [:]
  /// Refusals before the body of requests naming an upload id, for the id's next `HEAD`.
  var recentRefusals = RecentRefusals()
  /// Requests waiting for another request's hold on an upload to end (lock preemption).
  var holdWaiters: [UploadID: [CheckedContinuation<Void, Never>]] = [:]
  /// `Configuration.localName` through Avahi (`Discovery/`).
  let localNamePublication: LocalNamePublication

  /// Creates a session; nothing listens until `start()`.
  public init(configuration: Configuration = Configuration()) {
    self.init(configuration: configuration, pageBundle: PageSource.bundledFiles)
  }

  /// A session whose bundled page is `pageBundle` instead of the files embedded from `Page/`
  /// (tests use it to see what a build without them answers: 500 `page_missing`), and whose
  /// timing rules read `clock` (tests advance a manual one).
  init(
    configuration: Configuration, pageBundle: [String: [UInt8]],
    clock: any SessionClock = SystemSessionClock()
  ) {
    self.pageBundle = pageBundle
    self.configuration = configuration
    self.clock = clock
    (events, eventSink) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
    (progress, progressSink) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    (pauses, pauseSink) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1024))
    let staging = StagingFolder(root: configuration.stagingRoot)
    self.staging = staging
    resumableStore = configuration.resumableUploads.map {
      ResumableStore(staging: staging, scope: $0.scope)
    }
    admission = UploadAdmission(reservedFreeSpace: configuration.reservedFreeSpace)
    localNamePublication = LocalNamePublication(name: configuration.localName)
  }

  deinit {
    state.cancelTasks()
  }

  /// The addresses the page can be reached at (empty before `start()`).
  public var addresses: [Address] { state.addresses }

  /// The port the server listens on, once started.
  public var port: Int? { state.port }

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
    try await start(handover: nil)
  }

  /// Starts like ``start()``, but serves the listening socket an earlier session handed over
  /// (``finishHandingOverListener(grace:)``) instead of opening one, with the connections that
  /// session left unanswered: connections that arrived in between are served, none refused.
  ///
  /// The socket's port is used instead of `Configuration.port`; `bindAddress` must be the one
  /// the earlier session was configured with, since it still decides which interface addresses
  /// ``addresses`` lists, and ``resume()`` (after ``suspend()`` or a lost listener) opens a new
  /// socket on that address and the handed-over port. When the start fails, the handover is
  /// left as it was, to be given to another start (or dropped, which closes it); when this
  /// session was started already, it is left too. A start that takes the socket notes on the
  /// handover how many connections it found waiting (``ListenerHandover/connectionsTakenOver``).
  ///
  /// ```swift
  /// let (folder, handover) = try await server.finishHandingOverListener()
  /// let next = BrowserDropServer(configuration: configuration)
  /// if let handover { try await next.start(on: handover) } else { try await next.start() }
  /// ```
  @discardableResult
  public func start(on handover: ListenerHandover) async throws -> [Address] {
    try await start(handover: handover)
  }

  private func start(handover: ListenerHandover?) async throws -> [Address] {
    switch state {
    case .listening: return state.addresses
    case .suspended:
      try await resume()
      return state.addresses
    case .finishing, .ended: throw BrowserDropError.sessionEnded
    case .starting(let starting):
      // Another call is starting the session: its outcome is this one's.
      try await starting.value
      return state.addresses
    case .idle: break
    }
    let starting = Task { try await self.bringUp(handover: handover) }
    state = .starting(starting)
    do {
      try await starting.value
    } catch {
      // Nothing is left of a failed start (`bringUp` undid it): it may be tried again.
      if case .starting = state { state = .idle }
      throw error
    }
    return state.addresses
  }

  /// Stops listening and ends every connection; files that arrived are kept. Uploads in flight
  /// fail with `.cancelled` (the bundled page retries them after `resume()`).
  ///
  /// While ``finishHandingOverListener(grace:)`` ends the session, it does nothing.
  public func suspend() async {
    guard case .listening(let live, let listener) = state else { return }
    state = .suspended(live)
    listener.cancel()
    await listener.value
  }

  /// Listens again on the same port after `suspend()` or `.interrupted`; `addresses` then lists
  /// where the page is. When something else holds the port, it tries again for about a second
  /// before throwing `BrowserDropError.portUnavailable`.
  ///
  /// It returns nothing, so the seed's `case .interrupted: try? await server.resume()` compiles
  /// without a warning (`try?` on a call with a result warns that the result is unused).
  public func resume() async throws {
    var live: ServerState.Session
    switch state {
    case .listening: return
    case .finishing, .ended: throw BrowserDropError.sessionEnded
    case .idle, .starting:
      try await start()
      return
    case .suspended(let suspended): live = suspended
    }
    // The port was this server's a moment ago, yet a process the host is starting can still
    // hold the old listening socket: `posix_spawn` and `fork` copy every descriptor, and the
    // child drops the close-on-exec ones only when it calls `exec`. Seen as EADDRINUSE in the
    // test suite, which starts processes all the time. Try again briefly before giving up.
    var attempt = 1
    while true {
      let failure: BrowserDropError
      do {
        try listen(live, port: live.port, fallback: false)
        return
      } catch {
        failure = error
      }
      guard case .portUnavailable = failure, attempt < Self.relistenAttempts else { throw failure }
      attempt += 1
      try await clock.sleep(for: Self.relistenPause)
      // `suspend`, `finish` or `cancel` may have run meanwhile.
      switch state {
      case .suspended(let suspended): live = suspended
      case .listening: return
      case .finishing, .ended, .idle, .starting: throw BrowserDropError.sessionEnded
      }
    }
  }

  /// How often `resume()` tries its old port, `relistenPause` apart (one second in all).
  private static let relistenAttempts = 20
  private static let relistenPause = Duration.milliseconds(50)

  /// Ends the session and hands over its folder, or returns `nil` (and removes the folder) when
  /// nothing arrived. The folder is the caller's from then on: the server never touches it again.
  public func finish() async throws -> URL? {
    switch state {
    case .ended: throw BrowserDropError.sessionEnded
    case .finishing:
      // `finishHandingOverListener` is ending it: its folder is this call's too.
      if let handingOver {
        callsWaitingForHandover += 1
        defer { callsWaitingForHandover -= 1 }
        return try await handingOver.value.folder
      }
    case .idle, .starting, .listening, .suspended: break
    }
    return try await finishEnding()
  }

  /// `finish()`'s work.
  private func finishEnding() async throws -> URL? {
    if case .ended = state { throw BrowserDropError.sessionEnded }
    await end()
    await storeSettled()
    let staging = self.staging
    let empty = index.files.isEmpty
    await BlockingPool.shared.run {
      if empty { staging.removeAll() } else { staging.removeIncoming() }
    }
    storeLock = nil
    return empty ? nil : staging.session
  }

  /// Ends the session like ``finish()``, but keeps its listening socket open and returns it for
  /// the next session (``start(on:)``), so that the port is never closed in between.
  ///
  /// It stops admitting uploads and accepting connections at once: new connections wait in the
  /// kernel's queue (bounded by the listen backlog) for the next session. Uploads admitted
  /// already go on for up to `grace` and end in this session's folder. A connection this
  /// session accepted but had not answered (its head still arriving, or an upload that arrived
  /// after admission closed) is handed over with what it sent, so at most
  /// `maximumConnections` are. A page response being written when the listener task is ended
  /// (at once when nothing is admitted, else when the grace ends) is cut; the browser asks
  /// again and the next session answers.
  ///
  /// Still cut, as by ``finish()``: uploads and page responses still running when the grace
  /// ends (the upload fails with `.cancelled`; the bundled page resumes or sends it again), and
  /// everything when the session ends some other way meanwhile (``cancel()``, or a lost
  /// listener).
  ///
  /// The handover is `nil` when the session was not listening (suspended, or its listener
  /// lost); the next session then opens a socket of its own with ``start()``. Called again
  /// while it runs, or ``finish()`` called meanwhile, waits for it and returns the same folder
  /// (and the same handover, which only one session can take); ``cancel()`` meanwhile ends it
  /// at once, and it throws `BrowserDropError.sessionEnded`. ``suspend()`` meanwhile does
  /// nothing: the session is ending.
  public func finishHandingOverListener(
    grace: Duration = .seconds(5)
  ) async throws -> (folder: URL?, handover: ListenerHandover?) {
    if case .finishing = state, let handingOver {
      callsWaitingForHandover += 1
      defer { callsWaitingForHandover -= 1 }
      return try await handingOver.value
    }
    guard case .listening(let session, let listener) = state else {
      return (try await finish(), nil)
    }
    state = .finishing(session, listener: listener)
    // In the same step as the state change: an admission answered `.handOver` from now on
    // finds the collector parking, and a `cancel()` that runs before the work below finds
    // something to discard.
    session.services.handover.begin()
    let work = Task { try await handOver(session, listener: listener, grace: grace) }
    handingOver = work
    defer { handingOver = nil }
    return try await withTaskCancellationHandler {
      try await work.value
    } onCancel: {
      work.cancel()
    }
  }

  /// `finishHandingOverListener`'s work, in the `.finishing` state.
  private func handOver(
    _ session: ServerState.Session, listener: Task<Void, Never>, grace: Duration
  ) async throws -> (folder: URL?, handover: ListenerHandover?) {
    let collector = session.services.handover
    // Admission is closed (`admit` answers `.handOver`), so the count only falls. Polled: it is
    // above zero only when an upload began as the host decided to finish, which is rare.
    let deadline = clock.now + grace
    while admission.hasInFlight, clock.now < deadline, case .finishing = state {
      do { try await clock.sleep(for: Self.drainPoll) } catch { break }
    }
    // The connections end: unanswered ones park themselves, and the listener is kept.
    listener.cancel()
    await listener.value
    // `cancel` may have ended the session meanwhile (it discarded what was kept).
    guard case .finishing = state else { throw BrowserDropError.sessionEnded }
    let handover = collector.end()
    return (try await finishEnding(), handover)
  }

  /// How often `finishHandingOverListener` looks whether the admitted uploads have ended.
  private static let drainPoll = Duration.milliseconds(10)

  /// Ends the session and deletes everything that arrived.
  public func cancel() async {
    if case .ended = state { return }
    // A `finishHandingOverListener` under way stops waiting (its caller gets `sessionEnded`).
    handingOver?.cancel()
    await end()
    await storeSettled()
    let staging = self.staging
    // The staging root's store is touched only under its lock: a server that never got it (its
    // start failed because another server holds it, or it never started) must not remove that
    // server's uploads.
    let store = resumableStore.flatMap { !$0.remembersStored || storeLock != nil ? $0 : nil }
    let storedHere = self.storedHere
    await BlockingPool.shared.run {
      // Records, then partial files, then the session folder: a crash part-way never leaves a
      // record alone for a file that is gone. Paused uploads go, kept for later sessions too;
      // stored uploads of earlier sessions stay (their files were handed over).
      if let store {
        if store.remembersStored {
          store.removeForCancel(storedHere: storedHere)
        } else {
          store.removeAll()
        }
      }
      staging.removeAll()
    }
    self.storedHere = []
    storeLock = nil
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
}

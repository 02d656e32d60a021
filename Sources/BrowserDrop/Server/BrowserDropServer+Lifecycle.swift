import BrowserDropSystem
import FoundationEssentials
import Glibc

/// Starting, listening and ending: the moves between the states of `ServerState`. Every
/// `await` may let `suspend`, `finish` or `cancel` run, so the state is checked again after it.
extension BrowserDropServer {
  /// How often the interface addresses are looked at again while the session lasts.
  static let addressPollInterval = Duration.seconds(2)

  /// `start()`'s work, while the state is `.starting`: creates the staging folder, loads what
  /// connections need, binds (or takes `handover`'s socket, as the last step, so a failed start
  /// leaves it whole), and starts watching the addresses.
  func bringUp(handover: ListenerHandover?) async throws(BrowserDropError) {
    // The blocking pool's threads, made here so that a process out of threads gets an error
    // rather than a crash or a stall later.
    do throws(SystemError) {
      try BlockingPool.shared.start()
    } catch {
      throw BrowserDropError.listenFailed(error.description)
    }
    let staging = self.staging
    let claimsSharedRoot =
      staging.root == Configuration.defaultStagingRoot.standardizedFileURL
    let (caseInsensitive, partialKind, sessionFD) = try await BlockingPool.shared.run {
      () throws(BrowserDropError) -> (Bool, PartialFile.Kind, Int32) in
      do throws(StagingError) {
        try staging.create(claimingSharedRoot: claimsSharedRoot)
      } catch {
        throw BrowserDropError(error)
      }
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
    // The resumable store, and what an earlier session or process left in it to be resumed.
    let recovered: [(UploadID, ResumableStore.Record)]
    do throws(BrowserDropError) {
      let prepared = try await prepareResumableStore()
      recovered = prepared.0
      storeLock = prepared.1
    } catch {
      close(sessionFD)
      await BlockingPool.shared.run { staging.removeAll() }
      throw error
    }
    /// Undoes what was made when the start fails or the session ended meanwhile.
    func undo(_ error: BrowserDropError) async -> BrowserDropError {
      close(sessionFD)
      storeLock = nil
      await BlockingPool.shared.run { staging.removeAll() }
      return error
    }
    guard case .starting = state else { throw await undo(.sessionEnded) }
    index = SessionIndex(caseInsensitive: caseInsensitive)
    adoptRecovered(recovered)
    let services: SessionServices
    do throws(BrowserDropError) {
      services = try await SessionServices.load(
        server: self, configuration: configuration, staging: staging, partialKind: partialKind,
        pageBundle: pageBundle, clock: clock)
    } catch {
      throw await undo(error)
    }
    guard case .starting = state else { throw await undo(.sessionEnded) }
    let listener: Listener
    var waiting: AdoptedConnections?
    do throws(BrowserDropError) {
      if let handover {
        try startReactor()
        guard let contents = handover.take() else {
          throw .listenFailed("that listening socket was taken by another session already")
        }
        listener = contents.listener
        waiting = AdoptedConnections(contents.waiting)
      } else {
        listener = try openListener(port: configuration.port, fallback: true)
      }
    } catch {
      throw await undo(error)
    }
    let session = ServerState.Session(
      services: services, sessionFD: sessionFD, monitor: monitorAddresses(), port: listener.port,
      addresses: [], progressTask: nil)
    serve(session, on: listener, adopting: waiting)
  }

  /// Creates the resumable store when uploads are resumable, and reads what it holds when it
  /// outlives sessions, holding its lock (then returned) so no other server uses it meanwhile.
  private func prepareResumableStore() async throws(BrowserDropError) -> (
    [(UploadID, ResumableStore.Record)], StoreLock?
  ) {
    guard let store = resumableStore, let settings = configuration.resumableUploads else {
      return ([], nil)
    }
    return try await BlockingPool.shared.run {
      () throws(BrowserDropError) -> ([(UploadID, ResumableStore.Record)], StoreLock?) in
      let lock: StoreLock?
      do throws(SystemError) {
        try store.prepare()
        guard settings.scope == .stagingRoot else { return ([], nil) }
        lock = try store.lock()
      } catch {
        throw .stagingUnavailable(path: store.folder, reason: error.reason)
      }
      guard let lock else {
        throw .stagingUnavailable(
          path: store.folder,
          reason: "another server is using it for resumable uploads (it holds its lock)")
      }
      return (store.recover(expiresAfter: settings.expiresAfter), lock)
    }
  }

  /// Listens on `port` again for `session` (after `suspend()` or a lost listener).
  func listen(
    _ session: ServerState.Session, port: Int, fallback: Bool
  ) throws(BrowserDropError) {
    serve(session, on: try openListener(port: port, fallback: fallback))
  }

  private func openListener(port: Int, fallback: Bool) throws(BrowserDropError) -> Listener {
    try startReactor()
    do throws(ListenError) {
      return try Listener.open(address: configuration.bindAddress, port: port, fallback: fallback)
    } catch {
      throw BrowserDropError(error)
    }
  }

  /// Starts the event loop when it is not running. Started here rather than once per process:
  /// after `epoll_wait` failed, the loop is gone and `resume()` makes a new one. A process out of
  /// descriptors gets an error, not a crash.
  private func startReactor() throws(BrowserDropError) {
    do throws(SystemError) {
      try Reactor.shared.start()
    } catch {
      throw .listenFailed(error.description)
    }
  }

  /// Runs the listener and its connections, with `waiting` ones handed over by an earlier
  /// session, on the event loop (see `Reactor`); the state becomes `.listening`.
  private func serve(
    _ session: ServerState.Session, on listener: Listener,
    adopting waiting: AdoptedConnections? = nil
  ) {
    var session = session
    session.port = listener.port
    session.addresses = InterfaceAddresses.current(
      port: listener.port, bindAddress: configuration.bindAddress)
    let services = session.services
    let task = Task(executorPreference: Reactor.shared) { [weak self] in
      let lost = await services.serve(listener, adopting: waiting)
      if lost { await self?.listenerLost() }
    }
    state = .listening(session, listener: task)
    localNamePublication.begin(port: listener.port, addresses: session.addresses)
  }

  private func listenerLost() {
    guard case .listening(let session, _) = state else { return }
    state = .suspended(session)
    eventSink.yield(.interrupted)
  }

  /// Ends the session: stops listening, ends every connection, closes the streams.
  func end() async {
    let previous = state
    state = .ended(ServerState.Ended(port: previous.port, addresses: previous.addresses))
    switch previous {
    case .listening(let session, let listener), .finishing(let session, let listener):
      // A handover under way ends with the session: what it kept is closed, and connections
      // that would have parked are closed (its caller gets `sessionEnded`).
      session.services.handover.discard()
      session.monitor.cancel()
      listener.cancel()
      await listener.value
      session.progressTask?.cancel()
      close(session.sessionFD)
    case .suspended(let session):
      session.monitor.cancel()
      session.progressTask?.cancel()
      close(session.sessionFD)
    case .starting, .idle, .ended:
      // A start still running sees `.ended` after its next step and undoes what it made.
      break
    }
    endPausedUploads()
    localNamePublication.end(clock: clock)
    progressSink.finish()
    eventSink.finish()
  }

  private func monitorAddresses() -> Task<Void, Never> {
    let bindAddress = configuration.bindAddress
    let clock = self.clock
    return Task { [weak self] in
      while !Task.isCancelled {
        do { try await clock.sleep(for: Self.addressPollInterval) } catch { return }
        guard let port = await self?.state.session?.port else { return }
        let now = await BlockingPool.shared.run {
          InterfaceAddresses.current(port: port, bindAddress: bindAddress)
        }
        await self?.updateAddresses(now)
      }
    }
  }

  private func updateAddresses(_ addresses: [Address]) {
    guard let session = state.session, addresses != session.addresses else { return }
    state.updateSession { $0.addresses = addresses }
    localNamePublication.update(addresses)
    eventSink.yield(.addressesChanged(addresses))
  }
}

import BrowserDropSystem
import CBrowserDropLinux
import FoundationEssentials
import Glibc
import Synchronization

/// What connections share during one session: the configuration, the page, the staging folder
/// and the way back to the server actor. Immutable, so connections read it without a hop.
final class SessionServices: Sendable {
  weak let server: BrowserDropServer?
  let configuration: BrowserDropServer.Configuration
  let staging: StagingFolder
  let page: PageSource
  let pageConfiguration: PageConfiguration
  /// Protocol v1's check order, with this session's extensions and size limit.
  let requestPolicy: RequestPolicy
  let contentInspector: ContentInspector
  /// How this session's volume makes partial files.
  let partialKind: PartialFile.Kind
  let folderSync = FolderSync()
  /// How long a connection may be silent, on the server's clock.
  let idleTimeout: IdleTimeout
  /// What the session hands the next one when it ends with `finishHandingOverListener`.
  let handover = HandoverCollector()
  private let activeConnections = Atomic(0)

  private init(
    server: BrowserDropServer, configuration: BrowserDropServer.Configuration,
    staging: StagingFolder, partialKind: PartialFile.Kind, contentInspector: ContentInspector,
    pageBundle: [String: [UInt8]], clock: any SessionClock
  ) {
    self.server = server
    self.configuration = configuration
    self.staging = staging
    self.page = PageSource(configuration.page, bundle: pageBundle)
    let publication = server.localNamePublication
    self.pageConfiguration = PageConfiguration(configuration) { publication.nameInUse }
    self.requestPolicy = RequestPolicy(
      allowedExtensions: configuration.allowedExtensions.map { Set($0.map { $0.lowercased() }) },
      maximumFileSize: configuration.maximumFileSize,
      resumable: configuration.resumableUploads != nil)
    self.contentInspector = contentInspector
    self.partialKind = partialKind
    self.idleTimeout = IdleTimeout(duration: configuration.idleTimeout, clock: clock)
  }

  /// `config.json` now, with the local name once it is confirmed.
  var configResponse: [UInt8] { pageConfiguration.response }

  /// Loads what a session needs before it listens (the content-type database among them).
  static func load(
    server: BrowserDropServer, configuration: BrowserDropServer.Configuration,
    staging: StagingFolder, partialKind: PartialFile.Kind, pageBundle: [String: [UInt8]],
    clock: any SessionClock
  ) async throws(BrowserDropError) -> SessionServices {
    let inspector = try await ContentInspector.load(policy: configuration.contentPolicy)
    return SessionServices(
      server: server, configuration: configuration, staging: staging, partialKind: partialKind,
      contentInspector: inspector, pageBundle: pageBundle, clock: clock)
  }

  /// The free bytes on the staging volume, measured on the blocking pool (`statvfs` can block
  /// on a slow disk). An unreadable volume counts as full: better a 507 than a write that fails.
  func measureFreeBytes() async -> Int {
    let stagingPath = staging.sessionPath
    return await BlockingPool.shared.run { () -> Int in
      var free: UInt64 = 0
      return cbd_free_bytes(stagingPath, &free) == 0 ? Int(clamping: free) : 0
    }
  }

  /// Serves the connections an earlier session handed over (`adopting`, taken once) and
  /// accepts connections until cancelled, or until the session begins handing its listener
  /// over (`HandoverCollector.begin`): from then on arrivals wait in the kernel's queue for the
  /// next session. Each connection is a child task, so cancelling this ends them all before it
  /// returns. Returns `true` when the listener was lost rather than cancelled. The listener is
  /// closed then, unless the session is handing it over (`HandoverCollector`).
  func serve(_ listener: Listener, adopting: AdoptedConnections? = nil) async -> Bool {
    let lost = await withDiscardingTaskGroup { group in
      // Taken out of the box: each child holds its own connection, and nothing holds them all
      // for the session's life.
      for connection in adopting?.take() ?? [] {
        // Accepted already, by the earlier session (which kept them within its limit): served
        // whatever this session's count.
        activeConnections.add(1, ordering: .relaxed)
        group.addTask {
          await Connection(
            socket: connection.socket, services: self, received: connection.received,
            headDeadline: connection.headDeadline
          ).run()
          self.activeConnections.subtract(1, ordering: .relaxed)
        }
      }
      // Accepts until nothing is pending, and only then waits: readiness is edge-triggered
      // (`Reactor`), so a wait while connections are queued (a handed-over socket, or one left
      // after running out of descriptors) would not end until yet another one arrived.
      while !Task.isCancelled, handover.accepting(on: listener.socket.fd) {
        // Checked before every accept: once the session hands over, nothing more is accepted.
        while !handover.stopsAccepting {
          let fd: Int32?
          do throws(SystemError) {
            fd = try listener.acceptNow()
          } catch  where [ECONNABORTED, EPROTO, EPERM].contains(error.code) {
            continue
          } catch  where [EMFILE, ENFILE, ENOBUFS, ENOMEM].contains(error.code) {
            // Out of descriptors or memory: the connection stays queued; try again in a moment
            // (once a connection has ended) rather than spin, and without waiting for readiness,
            // which a queue that didn't change never reports again.
            do { try await Task.sleep(for: .milliseconds(50)) } catch { return false }
            continue
          } catch {
            return true
          }
          guard let fd else { break }
          let socket = Socket(fd: fd)
          guard
            activeConnections.add(1, ordering: .relaxed).newValue
              <= configuration.maximumConnections
          else {
            activeConnections.subtract(1, ordering: .relaxed)
            socket.close()
            continue
          }
          group.addTask {
            await Connection(socket: socket, services: self).run()
            self.activeConnections.subtract(1, ordering: .relaxed)
          }
        }
        if handover.stopsAccepting { return false }
        do {
          try await listener.waitForConnection()
        } catch {
          // Woken by `HandoverCollector.begin`: not lost, and nothing more is accepted.
          if handover.stopsAccepting { return false }
          return !Task.isCancelled
        }
      }
      return false
    }
    handover.stoppedAccepting()
    if lost || !handover.keep(listener) { listener.close() }
    return lost
  }
}

/// The connections an earlier session handed over, given to the task that serves the next
/// session's listener and taken out once, so that the task does not keep them (and what they
/// had sent) for the session's life.
final class AdoptedConnections: Sendable {
  private let connections: Mutex<[ParkedConnection]>

  init(_ connections: [ParkedConnection]) {
    self.connections = Mutex(connections)
  }

  /// The connections, once; empty afterwards.
  func take() -> [ParkedConnection] {
    connections.withLock { connections in
      defer { connections = [] }
      return connections
    }
  }
}

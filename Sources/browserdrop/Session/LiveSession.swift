import BrowserDrop
import FoundationEssentials
import Synchronization

/// One running upload session: the server, and the tasks that pass its events and progress to
/// the reporter while keeping count of what is in flight.
final class LiveSession: Sendable {
  /// The server.
  let server: BrowserDropServer
  /// The addresses it listens at.
  let addresses: [Address]
  /// Uploads in flight, files received and when something last happened.
  let activity: SessionActivity
  private let pumps: Task<Void, Never>

  private init(
    server: BrowserDropServer, addresses: [Address], activity: SessionActivity,
    pumps: Task<Void, Never>
  ) {
    self.server = server
    self.addresses = addresses
    self.activity = activity
    self.pumps = pumps
  }

  /// Starts a server with `configuration` and follows it.
  static func start(
    configuration: BrowserDropServer.Configuration, reporter: any Reporter
  ) async throws -> LiveSession {
    let server = BrowserDropServer(configuration: configuration)
    let addresses = try await server.start()
    let activity = SessionActivity()
    // On the server's event loop: an event is reported in the same turn as the upload that
    // caused it, with no thread woken for it. Reporters only format and queue their text
    // (`StandardOutput`), so nothing here blocks the loop.
    let pumps = Task(executorPreference: server.connectionExecutor) {
      await withTaskGroup(of: Void.self) { group in
        group.addTask {
          for await event in server.events {
            activity.note(event)
            reporter.report(.server(event))
            if case .interrupted = event {
              Task { await resume(server, reporter: reporter) }
            }
          }
        }
        group.addTask {
          for await list in server.progress {
            activity.note(list)
            reporter.report(.progress(list))
          }
        }
      }
    }
    return LiveSession(server: server, addresses: addresses, activity: activity, pumps: pumps)
  }

  /// Ends the session (uploads in flight are dropped) and returns its folder, or `nil` when
  /// nothing arrived. Every event has been reported when it returns.
  func finish() async throws -> URL? {
    let folder = try await server.finish()
    await pumps.value
    return folder
  }

  /// Listens again after the listener was lost, trying every two seconds.
  private static func resume(_ server: BrowserDropServer, reporter: any Reporter) async {
    while true {
      do {
        try await server.resume()
        return
      } catch BrowserDropError.sessionEnded {
        return
      } catch {
        reporter.report(.notice("Can't listen again yet: \(error)"))
      }
      try? await Task.sleep(for: .seconds(2))
    }
  }
}

/// What a session is doing, for the summary and for kiosk batches.
final class SessionActivity: Sendable {
  private struct State {
    var inFlight = 0
    var files = 0
    var bytes: Int64 = 0
    var lastActivity = Monotonic.seconds()
  }

  private let state = Mutex(State())

  /// Uploads started and not yet finished or failed.
  var inFlight: Int { state.withLock { $0.inFlight } }
  /// Files received.
  var files: Int { state.withLock { $0.files } }
  /// Bytes received.
  var bytes: Int64 { state.withLock { $0.bytes } }

  /// Seconds since the last upload started, finished or made progress.
  func quietSeconds(now: Double = Monotonic.seconds()) -> Double {
    state.withLock { now - $0.lastActivity }
  }

  func note(_ event: Event) {
    state.withLock { state in
      state.lastActivity = Monotonic.seconds()
      switch event {
      case .uploadStarted: state.inFlight += 1
      case .uploadFinished(let file):
        state.inFlight = max(0, state.inFlight - 1)
        state.files += 1
        state.bytes += Int64(file.size)
      case .uploadFailed: state.inFlight = max(0, state.inFlight - 1)
      case .addressesChanged, .interrupted: break
      }
    }
  }

  func note(_ progress: [UploadProgress]) {
    guard !progress.isEmpty else { return }
    state.withLock { $0.lastActivity = Monotonic.seconds() }
  }
}

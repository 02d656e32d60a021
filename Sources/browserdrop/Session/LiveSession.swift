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
  /// Keeps the session's reports until ``report()`` when it was started `held`.
  private let held: HeldReporter?

  private init(
    server: BrowserDropServer, addresses: [Address], activity: SessionActivity,
    pumps: Task<Void, Never>, held: HeldReporter?
  ) {
    self.server = server
    self.addresses = addresses
    self.activity = activity
    self.pumps = pumps
    self.held = held
  }

  /// Starts a server with `configuration` and follows it; on `handover`'s listening socket
  /// when given (the kiosk's previous batch), which is left as it was when the start fails.
  /// With `held`, its reports wait (in the order they were made) until ``report()``, while
  /// the session runs and keeps count: the kiosk starts the next batch's session before it
  /// reports the closing batch, whose line must come first.
  static func start(
    configuration: BrowserDropServer.Configuration, reporter: any Reporter,
    handover: ListenerHandover? = nil, held: Bool = false
  ) async throws -> LiveSession {
    let server = BrowserDropServer(configuration: configuration)
    let addresses =
      if let handover {
        try await server.start(on: handover)
      } else {
        try await server.start()
      }
    let activity = SessionActivity()
    let heldReporter = held ? HeldReporter(reporter) : nil
    // Everything the session reports goes through the held reporter when there is one.
    let sessionReporter = heldReporter ?? reporter
    // On the server's event loop: an event is reported in the same turn as the upload that
    // caused it, with no thread woken for it. Reporters only format and queue their text
    // (`StandardOutput`), so nothing here blocks the loop.
    let pumps = Task(executorPreference: server.connectionExecutor) {
      await withTaskGroup(of: Void.self) { group in
        group.addTask {
          for await event in server.events {
            let pausedBytes = activity.note(event)
            if case .uploadFailed(let upload, .cancelled) = event, let pausedBytes,
              configuration.resumableUploads?.scope == .stagingRoot
            {
              // Not lost: kept in the staging root for the next session.
              sessionReporter.report(.carriedOver(upload, keptBytes: pausedBytes))
              continue
            }
            sessionReporter.report(.server(event))
            if case .interrupted = event {
              Task { await resume(server, reporter: sessionReporter) }
            }
          }
        }
        group.addTask {
          for await pause in server.pauses {
            activity.note(pause)
            sessionReporter.report(.pause(pause))
          }
        }
        group.addTask {
          for await change in server.localNameChanges {
            sessionReporter.report(.localName(change))
          }
        }
        group.addTask {
          for await list in server.progress {
            activity.note(list)
            sessionReporter.report(.progress(list))
          }
        }
      }
    }
    return LiveSession(
      server: server, addresses: addresses, activity: activity, pumps: pumps,
      held: heldReporter)
  }

  /// Lets a session started `held` report, what it kept first.
  func report() {
    held?.release()
  }

  /// Ends the session (uploads in flight are dropped) and returns its folder, or `nil` when
  /// nothing arrived. Every event has been reported when it returns.
  func finish() async throws -> URL? {
    report()
    let folder = try await server.finish()
    await pumps.value
    return folder
  }

  /// Ends the session like `finish()`, keeping its listening socket open for the next session
  /// (`BrowserDropServer.finishHandingOverListener`): uploads admitted already end here, and
  /// connections not yet answered wait for the next session rather than being cut.
  func finishHandingOverListener() async throws -> (folder: URL?, handover: ListenerHandover?) {
    report()
    let finished = try await server.finishHandingOverListener()
    await pumps.value
    return finished
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
    /// Uploads arriving now: `Upload.id` → path.
    var arriving: [UInt64: String] = [:]
    /// Paused uploads: their path and the bytes they kept.
    var paused: [UInt64: (path: String, kept: Int)] = [:]
    /// Uploads that ended: a `.resumed` read after its upload's end (the pause events come on
    /// a stream of their own) must not count it as arriving again.
    var ended: Set<UInt64> = []
    var files = 0
    var bytes: Int64 = 0
    var lastActivity = Monotonic.seconds()
  }

  private let state = Mutex(State())

  /// Uploads arriving: started or resumed, and not yet paused, finished or failed. A paused
  /// upload does not hold a kiosk batch open.
  var inFlight: Int { state.withLock { $0.arriving.count } }
  /// Files received.
  var files: Int { state.withLock { $0.files } }
  /// Bytes received.
  var bytes: Int64 { state.withLock { $0.bytes } }

  /// Seconds since the last upload started, finished or made progress.
  func quietSeconds(now: Double = Monotonic.seconds()) -> Double {
    state.withLock { now - $0.lastActivity }
  }

  /// Notes an event. Returns, for the end of an upload that was paused, the bytes it kept.
  @discardableResult
  func note(_ event: Event) -> Int? {
    state.withLock { state in
      state.lastActivity = Monotonic.seconds()
      switch event {
      case .uploadStarted(let upload):
        if !state.ended.contains(upload.id) { state.arriving[upload.id] = upload.relativePath }
        return nil
      case .uploadFinished(let file):
        state.files += 1
        state.bytes += Int64(file.size)
        // The event names the file, not its `Upload`: the earliest arriving (or paused) upload
        // of that path is the one that finished.
        // A resumed upload can finish before its `.resumed` is read: paused ones count too.
        let ids =
          state.arriving.filter { $0.value == file.relativePath }.map(\.key)
          + state.paused.filter { $0.value.path == file.relativePath }.map(\.key)
        if let id = ids.min() {
          state.arriving.removeValue(forKey: id)
          state.ended.insert(id)
          state.paused.removeValue(forKey: id)
        }
        return nil
      case .uploadFailed(let upload, _):
        state.arriving.removeValue(forKey: upload.id)
        state.ended.insert(upload.id)
        return state.paused.removeValue(forKey: upload.id)?.kept
      case .addressesChanged, .interrupted:
        return nil
      }
    }
  }

  /// Notes a resumable upload pausing or resuming.
  func note(_ pause: PauseEvent) {
    state.withLock { state in
      state.lastActivity = Monotonic.seconds()
      switch pause {
      case .paused(let upload, let kept):
        guard !state.ended.contains(upload.id) else { return }
        state.arriving.removeValue(forKey: upload.id)
        state.paused[upload.id] = (upload.relativePath, kept)
      case .resumed(let upload, _):
        guard !state.ended.contains(upload.id) else { return }
        state.paused.removeValue(forKey: upload.id)
        state.arriving[upload.id] = upload.relativePath
      }
    }
  }

  func note(_ progress: [UploadProgress]) {
    guard !progress.isEmpty else { return }
    state.withLock { $0.lastActivity = Monotonic.seconds() }
  }
}

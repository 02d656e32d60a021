import BrowserDrop
import BrowserDropForwarding

/// Something the command tells its user, whatever the output style.
enum Report: Sendable {
  /// The server listens at these addresses.
  case listening([Address])
  /// An event from the server.
  case server(Event)
  /// A resumable upload paused or resumed.
  case pause(PauseEvent)
  /// News of `--name` from the server (Operations/ turns it into notices and the address list).
  case localName(LocalNameChange)
  /// Kiosk: the batch closed while this upload was paused; it is kept and continues in a
  /// later batch (the server's `.uploadFailed(…, .cancelled)` for it is reported as this).
  case carriedOver(Upload, keptBytes: Int)
  /// Uploads in flight (terminal display only).
  case progress([UploadProgress])
  /// The session is finishing: no new uploads, in-flight ones are dropped.
  case finishing
  /// The session ended with nothing received.
  case nothingArrived
  /// Kiosk: a batch was closed and moved to the outbox; `handedOver` connections were waiting
  /// for an answer as it closed and went to the next session with the listening socket (0 when
  /// the kiosk is stopping, the next session could not start or the listener was lost).
  case batchClosed(name: String, files: Int, bytes: Int64, handedOver: Int)
  /// Forwarding a folder started.
  case forwardStarted(destination: String)
  /// Forwarding made progress (throttled).
  case forwardProgress(ForwardProgress)
  /// A folder was forwarded; `bytes` counts every file in it.
  case forwarded(ForwardReport, bytes: Int64)
  /// Forwarding failed; the folder at `staging` is kept.
  case forwardFailed(message: String, staging: String)
  /// Kiosk: forwarding will be tried again after this many seconds.
  case retrying(seconds: Int)
  /// The received files were kept (no `--to`) in this folder.
  case kept(staging: String, files: Int, bytes: Int64)
  /// The command stopped before it was done; what remains is in `staging`, when anything does.
  case stopped(message: String, staging: String?)
  /// Anything else worth a line.
  case notice(String)
}

/// Shows reports in one output style.
protocol Reporter: Sendable {
  /// Shows one report.
  func report(_ report: Report)
  /// A line under the live display saying what to do (terminal display only).
  func setHint(_ hint: String)
}

extension Reporter {
  func setHint(_ hint: String) {}
}

/// Makes the reporter for an output style.
enum ReporterFactory {
  static func make(style: CommandOptions.OutputStyle, drawsQRCode: Bool) -> any Reporter {
    switch style {
    case .json: JSONReporter(output: .shared)
    case .plain: PlainReporter(output: .shared)
    case .terminal: TerminalReporter(output: .shared, drawsQRCode: drawsQRCode)
    }
  }
}

import BrowserDrop
import BrowserDropForwarding
import FoundationEssentials

/// `--json`: exactly one JSON object per line, written at once, its type under `"event"`.
struct JSONReporter: Reporter {
  let output: StandardOutput

  func report(_ report: Report) {
    guard let members = Self.members(for: report) else { return }
    output.line(JSONValue.object(members).serialized)
  }

  /// A possible leftover's reason as it appears in `possibleLeftovers`.
  static func name(of reason: ForwardReport.PossibleLeftover.Reason) -> String {
    switch reason {
    case .claimAnswerLost: "claimAnswerLost"
    case .claimNotRecorded: "claimNotRecorded"
    }
  }

  /// The object for a report; `nil` for reports that have no JSON form.
  static func members(for report: Report) -> [(String, JSONValue)]? {
    switch report {
    case .listening(let addresses):
      return [("event", .string("listening")), ("addresses", addressList(addresses))]
    case .server(let event):
      return members(for: event)
    case .progress, .localName:
      return nil
    case .finishing:
      return [("event", .string("finishing"))]
    case .nothingArrived:
      return [("event", .string("nothingArrived"))]
    case .batchClosed(let name, let files, let bytes, let handedOver):
      return [
        ("event", .string("batchClosed")), ("batch", .string(name)), ("files", .number(files)),
        ("bytes", .number(bytes)), ("handedOver", .number(handedOver)),
      ]
    case .forwardStarted(let destination):
      return [("event", .string("forwardStarted")), ("destination", .string(destination))]
    case .forwardProgress(let progress):
      return [
        ("event", .string("forwardProgress")), ("files", .number(progress.completedFiles)),
        ("totalFiles", .number(progress.totalFiles)), ("bytes", .number(progress.completedBytes)),
        ("totalBytes", .number(progress.totalBytes)),
      ]
    case .forwarded(let report, let bytes):
      let renamed = report.renames.map { rename in
        JSONValue.object([("from", .string(rename.source)), ("to", .string(rename.destination))])
      }
      let leftovers = report.possibleLeftovers.map { leftover in
        JSONValue.object([
          ("path", .string(leftover.path)), ("source", .string(leftover.source)),
          ("reason", .string(Self.name(of: leftover.reason))),
        ])
      }
      return [
        ("event", .string("forwarded")), ("destination", .string(report.destination)),
        ("files", .number(report.files.count)), ("bytes", .number(bytes)),
        ("renamed", .array(renamed)), ("possibleLeftovers", .array(leftovers)),
      ]
    case .forwardFailed(let message, let staging):
      return [
        ("event", .string("forwardFailed")), ("message", .string(message)),
        ("staging", .string(staging)),
      ]
    case .retrying(let seconds):
      return [("event", .string("retrying")), ("seconds", .number(seconds))]
    case .kept(let staging, let files, let bytes):
      return [
        ("event", .string("kept")), ("staging", .string(staging)), ("files", .number(files)),
        ("bytes", .number(bytes)),
      ]
    case .stopped(let message, let staging):
      return [
        ("event", .string("stopped")), ("message", .string(message)),
        ("staging", .optional(staging)),
      ]
    case .notice(let message):
      return [("event", .string("notice")), ("message", .string(message))]
    case .pause(.paused(let upload, let kept)):
      return [
        ("event", .string("uploadPaused")), ("path", .string(upload.relativePath)),
        ("size", .number(upload.size)), ("receivedBytes", .number(kept)),
      ]
    case .pause(.resumed(let upload, let offset)):
      return [
        ("event", .string("uploadResumed")), ("path", .string(upload.relativePath)),
        ("size", .number(upload.size)), ("offset", .number(offset)),
      ]
    case .carriedOver(let upload, let kept):
      return [
        ("event", .string("uploadCarriedOver")), ("path", .string(upload.relativePath)),
        ("size", .number(upload.size)), ("receivedBytes", .number(kept)),
      ]
    }
  }

  private static func members(for event: Event) -> [(String, JSONValue)] {
    switch event {
    case .uploadStarted(let upload):
      return [
        ("event", .string("uploadStarted")), ("path", .string(upload.relativePath)),
        ("size", .number(upload.size)),
      ]
    case .uploadFinished(let file):
      return [
        ("event", .string("uploadFinished")), ("path", .string(file.relativePath)),
        ("size", .number(file.size)), ("mimeType", .optional(file.mimeType)),
        ("kind", .string(file.kind.rawValue)),
      ]
    case .uploadFailed(let upload, let reason):
      return [
        ("event", .string("uploadFailed")), ("path", .string(upload.relativePath)),
        ("reason", .string(reason.description)),
      ]
    case .addressesChanged(let addresses):
      return [("event", .string("addressesChanged")), ("addresses", addressList(addresses))]
    case .interrupted:
      return [("event", .string("interrupted"))]
    }
  }

  private static func addressList(_ addresses: [Address]) -> JSONValue {
    .array(
      addresses.map { address in
        .object([
          ("url", .string(address.url.absoluteString)), ("kind", .string(address.kind.rawValue)),
          ("interface", .string(address.interface)),
        ])
      })
  }
}

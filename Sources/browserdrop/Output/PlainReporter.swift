import BrowserDrop
import BrowserDropForwarding
import FoundationEssentials

/// Standard output is not a terminal: one plain line per event, no progress, no QR code.
struct PlainReporter: Reporter {
  let output: StandardOutput

  func report(_ report: Report) {
    for line in ReportText.lines(for: report) {
      output.line(line)
    }
  }
}

/// The human sentences for reports, shared by the plain and terminal displays. Text that came
/// from a request is escaped.
enum ReportText {
  /// How an empty file may have been left at a name (`ForwardReport.PossibleLeftover`).
  static func leftoverCause(_ reason: ForwardReport.PossibleLeftover.Reason) -> String {
    switch reason {
    case .claimAnswerLost: "whose answer was lost"
    case .claimNotRecorded: "that was cut off before it was recorded"
    }
  }

  static func lines(for report: Report) -> [String] {
    switch report {
    case .listening(let addresses):
      return ["Open one of these addresses in a browser on the same network:"]
        + addresses.map(describe)
    case .server(let event):
      return lines(for: event)
    case .progress, .localName:
      return []
    case .finishing:
      return ["Finishing: no new uploads; uploads still in flight are dropped."]
    case .nothingArrived:
      return ["Nothing arrived."]
    case .batchClosed(let name, let files, let bytes, let handedOver):
      let waiting =
        handedOver == 0 ? "" : "; \(count(handedOver, "waiting connection")) went to the next batch"
      return [
        "Batch \(TerminalText.escaped(name)) closed: \(count(files, "file")) "
          + "(\(ByteSize.format(bytes)))\(waiting)."
      ]
    case .forwardStarted(let destination):
      return ["Forwarding to \(TerminalText.escaped(destination))…"]
    case .forwardProgress:
      return []
    case .forwarded(let report, let bytes):
      let head =
        "Forwarded \(count(report.files.count, "file")) (\(ByteSize.format(bytes))) to "
        + "\(TerminalText.escaped(report.destination))."
      return [head]
        + report.renames.map {
          "  \(TerminalText.escaped($0.source)) arrived as \(TerminalText.escaped($0.destination))"
        }
        + report.possibleLeftovers.map { leftover in
          "  Claim left in place at \(TerminalText.escaped(report.destination)): "
            + "\(TerminalText.escaped(leftover.path)) (empty, or one line “browserdrop claim …”). "
            + "A claim for "
            + "\(TerminalText.escaped(leftover.source)) \(leftoverCause(leftover.reason)) may "
            + "have made it, or it is a file delivered there before (by this kiosk or another "
            + "writer); \(TerminalText.escaped(leftover.source)) itself arrived under another "
            + "name. Nothing proves this kiosk made it, so it was not removed: check it before "
            + "you remove it."
        }
    case .forwardFailed(let message, let staging):
      return [
        "Forwarding failed: \(TerminalText.escaped(message))",
        "The files are kept in \(TerminalText.escaped(staging))",
      ]
    case .retrying(let seconds):
      return ["Trying again in \(seconds) s."]
    case .kept(let staging, let files, let bytes):
      return [
        "Received \(count(files, "file")) (\(ByteSize.format(bytes))); "
          + (files == 1 ? "it is in " : "they are in ")
          + TerminalText.escaped(staging)
      ]
    case .stopped(let message, let staging):
      return [TerminalText.escaped(message)]
        + (staging.map { ["The files are kept in \(TerminalText.escaped($0))"] } ?? [])
    case .notice(let message):
      return [TerminalText.escaped(message)]
    case .pause(.paused(let upload, let kept)):
      return [
        "Paused \(name(upload.relativePath)) at \(ByteSize.format(kept)) of "
          + "\(ByteSize.format(upload.size)); it resumes when the sender is back"
      ]
    case .pause(.resumed(let upload, let offset)):
      return ["Resuming \(name(upload.relativePath)) from \(ByteSize.format(offset))"]
    case .carriedOver(let upload, let kept):
      return [
        "Paused \(name(upload.relativePath)) (\(ByteSize.format(kept)) of "
          + "\(ByteSize.format(upload.size))) continues in the next batch"
      ]
    }
  }

  static func lines(for event: Event) -> [String] {
    switch event {
    case .uploadStarted(let upload):
      return ["Receiving \(name(upload.relativePath)) (\(ByteSize.format(upload.size)))"]
    case .uploadFinished(let file):
      let type = file.mimeType.map { ", " + TerminalText.escaped($0) } ?? ""
      return ["Received \(name(file.relativePath)) (\(ByteSize.format(file.size))\(type))"]
    case .uploadFailed(let upload, let reason):
      return ["Failed \(name(upload.relativePath)): \(TerminalText.escaped(reason.description))"]
    case .addressesChanged(let addresses):
      return ["The addresses changed:"] + addresses.map(describe)
    case .interrupted:
      return ["The listener was lost; listening again…"]
    }
  }

  static func describe(_ address: Address) -> String {
    "  \(address.url.absoluteString)  (\(kindName(address.kind)), \(address.interface))"
  }

  static func kindName(_ kind: Address.Kind) -> String {
    switch kind {
    case .wired: "wired"
    case .wifi: "Wi-Fi"
    case .hotspot: "hotspot"
    case .other: "other"
    }
  }

  static func name(_ path: String) -> String {
    TerminalText.escaped(path)
  }

  /// "1 file", "2 files", "2 batches": English plurals of the nouns the command counts.
  static func count(_ number: Int, _ noun: String) -> String {
    guard number != 1 else { return "1 \(noun)" }
    let sibilant = ["s", "x", "z", "ch", "sh"].contains { noun.hasSuffix($0) }
    return "\(number) \(noun)\(sibilant ? "es" : "s")"
  }
}

import BrowserDrop
import BrowserDropForwarding
import CBrowserDropLinux
import FoundationEssentials
import Glibc
import Synchronization

/// Standard output is a terminal: the QR code, finished and failed uploads scrolling above, and
/// a live area at the bottom with one line per upload in flight and a summary line.
final class TerminalReporter: Reporter {
  private struct State {
    var liveLineCount = 0
    var uploads: [UInt64: UploadMeter] = [:]
    var receivedFiles = 0
    var receivedBytes: Int64 = 0
    var failedUploads = 0
    var forwarding: ForwardProgress?
    var hint = ""
  }

  private let output: StandardOutput
  private let drawsQRCode: Bool
  private let state = Mutex(State())

  init(output: StandardOutput, drawsQRCode: Bool) {
    self.output = output
    self.drawsQRCode = drawsQRCode
  }

  func setHint(_ hint: String) {
    state.withLock { state in
      state.hint = hint
      output.write(redraw(&state, scrolling: []))
    }
  }

  func report(_ report: Report) {
    let now = Monotonic.seconds()
    state.withLock { state in
      var scrolled: [String] = []
      switch report {
      case .listening(let addresses):
        scrolled = ReportText.lines(for: report)
        if drawsQRCode, let first = addresses.first,
          let code = QRCode.lines(for: first.url.absoluteString)
        {
          scrolled += [""] + code + ["Scan to open \(first.url.absoluteString)", ""]
        }
      case .server(let event):
        scrolled = apply(event, to: &state)
      case .pause(.paused(let upload, _)), .carriedOver(let upload, _):
        // Its bar goes (it is not arriving); the line says how far it got.
        state.uploads[upload.id] = nil
        scrolled = ReportText.lines(for: report).map { "\u{1B}[33m‖\u{1B}[0m " + $0 }
      case .progress(let list):
        let current = Set(list.map(\.upload.id))
        state.uploads = state.uploads.filter { current.contains($0.key) }
        for entry in list {
          state.uploads[entry.upload.id, default: UploadMeter(upload: entry.upload, now: now)]
            .update(receivedBytes: entry.receivedBytes, now: now)
        }
      case .forwardStarted:
        state.forwarding = ForwardProgress(
          completedFiles: 0, totalFiles: 0, completedBytes: 0, totalBytes: 0)
        scrolled = ReportText.lines(for: report)
      case .forwardProgress(let progress):
        state.forwarding = progress
      case .forwarded, .forwardFailed:
        state.forwarding = nil
        scrolled = ReportText.lines(for: report).map { "\u{1B}[1m" + $0 + "\u{1B}[0m" }
      case .batchClosed:
        state.receivedFiles = 0
        state.receivedBytes = 0
        state.failedUploads = 0
        scrolled = ReportText.lines(for: report)
      default:
        scrolled = ReportText.lines(for: report)
      }
      output.write(redraw(&state, scrolling: scrolled))
    }
  }

  private func apply(_ event: Event, to state: inout State) -> [String] {
    switch event {
    case .uploadStarted:
      return []
    case .uploadFinished(let file):
      state.receivedFiles += 1
      state.receivedBytes += Int64(file.size)
      state.uploads = state.uploads.filter { $0.value.upload.relativePath != file.relativePath }
      return ReportText.lines(for: event).map { "\u{1B}[32m✓\u{1B}[0m " + $0 }
    case .uploadFailed(let upload, _):
      state.failedUploads += 1
      state.uploads[upload.id] = nil
      return ReportText.lines(for: event).map { "\u{1B}[31m✗\u{1B}[0m " + $0 }
    case .addressesChanged, .interrupted:
      return ReportText.lines(for: event)
    }
  }

  /// Clears the live area, writes `scrolling` above it and draws it again.
  private func redraw(_ state: inout State, scrolling: [String]) -> String {
    let columns = TerminalText.columns()
    var text = "\r"
    if state.liveLineCount > 0 { text += "\u{1B}[\(state.liveLineCount)A" }
    text += "\u{1B}[J"
    for line in scrolling { text += line + "\n" }
    let live = liveLines(state, columns: columns)
    for line in live { text += DisplayWidth.truncated(line, to: columns - 1) + "\n" }
    state.liveLineCount = live.count
    return text
  }

  private func liveLines(_ state: State, columns: Int) -> [String] {
    var lines = state.uploads.values.sorted { $0.upload.id < $1.upload.id }.map {
      $0.line(columns: columns)
    }
    if let forwarding = state.forwarding, forwarding.totalFiles > 0 {
      let bar = ProgressBar.draw(fraction: forwarding.fractionCompleted, width: 20)
      lines.append(
        "Forwarding  \(bar)  \(forwarding.completedFiles)/\(forwarding.totalFiles) files  "
          + "\(ByteSize.format(forwarding.completedBytes)) of "
          + ByteSize.format(forwarding.totalBytes))
    }
    var summary =
      "\(ReportText.count(state.receivedFiles, "file")) received "
      + "(\(ByteSize.format(state.receivedBytes)))"
    if !state.uploads.isEmpty { summary += " · \(state.uploads.count) in flight" }
    if state.failedUploads > 0 { summary += " · \(state.failedUploads) failed" }
    if !state.hint.isEmpty { summary += " — " + state.hint }
    lines.append(summary)
    return lines
  }
}

/// One upload in flight: how much arrived, how fast, how long is left.
struct UploadMeter {
  let upload: Upload
  private(set) var receivedBytes = 0
  private var lastBytes = 0
  private var lastTime: Double
  private var bytesPerSecond = 0.0

  init(upload: Upload, now: Double) {
    self.upload = upload
    self.lastTime = now
  }

  mutating func update(receivedBytes: Int, now: Double) {
    self.receivedBytes = receivedBytes
    let elapsed = now - lastTime
    guard elapsed >= 0.25 else { return }
    let instant = Double(receivedBytes - lastBytes) / elapsed
    bytesPerSecond = bytesPerSecond == 0 ? instant : 0.7 * bytesPerSecond + 0.3 * instant
    lastBytes = receivedBytes
    lastTime = now
  }

  /// `name  ██████░░░░  45%  12.3 MiB of 40.0 MiB  2.1 MiB/s  0:13 left`
  func line(columns: Int) -> String {
    let fraction = upload.size > 0 ? Double(receivedBytes) / Double(upload.size) : 1
    let bar = ProgressBar.draw(fraction: fraction, width: 16)
    let percent = "\(Int((fraction * 100).rounded(.down)))%"
    var figures =
      "\(ByteSize.format(receivedBytes)) of \(ByteSize.format(upload.size))"
    if bytesPerSecond > 0 {
      figures += "  \(ByteSize.format(Int(bytesPerSecond)))/s"
      let left = Double(upload.size - receivedBytes) / bytesPerSecond
      figures += "  \(Self.duration(left)) left"
    }
    // Padded or cut to 4 characters (ASCII only).
    let fixed = "  \(bar) \(String((percent + "    ").prefix(4)))  \(figures)"
    let nameWidth = max(12, columns - 1 - fixed.count - 2)
    let name = DisplayWidth.truncated(TerminalText.escaped(upload.relativePath), to: nameWidth)
    return "  " + DisplayWidth.padded(name, to: min(nameWidth, 40)) + fixed
  }

  static func duration(_ seconds: Double) -> String {
    guard seconds.isFinite, seconds >= 0, seconds < 360_000 else { return "--:--" }
    let total = Int(seconds.rounded(.up))
    let (hours, minutes, secs) = (total / 3600, total / 60 % 60, total % 60)
    let two = { (value: Int) in value < 10 ? "0\(value)" : "\(value)" }
    return hours > 0 ? "\(hours):\(two(minutes)):\(two(secs))" : "\(minutes):\(two(secs))"
  }
}

/// A bar of `width` cells: `██████░░░░`.
enum ProgressBar {
  static func draw(fraction: Double, width: Int) -> String {
    let clamped = min(max(fraction.isFinite ? fraction : 0, 0), 1)
    let filled = Int((clamped * Double(width)).rounded(.down))
    return String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
  }
}

/// Terminal column counts: East Asian wide characters and most emoji take two columns.
enum DisplayWidth {
  static func of(_ text: String) -> Int {
    text.unicodeScalars.reduce(0) { $0 + width(of: $1) }
  }

  static func width(of scalar: Unicode.Scalar) -> Int {
    switch scalar.value {
    case 0x0300...0x036F, 0x200B...0x200D, 0xFE00...0xFE0F: 0
    case 0x1100...0x115F, 0x2E80...0xA4CF, 0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F,
      0xFF00...0xFF60, 0xFFE0...0xFFE6, 0x1F300...0x1FAFF, 0x20000...0x3FFFD:
      2
    default: 1
    }
  }

  /// At most `columns` columns, cut in the middle with `…`; escape sequences are not expected.
  static func truncated(_ text: String, to columns: Int) -> String {
    guard of(text) > columns, columns > 1 else { return text }
    let half = (columns - 1) / 2
    var head = ""
    var used = 0
    for character in text {
      let width = of(String(character))
      if used + width > columns - 1 - half { break }
      head.append(character)
      used += width
    }
    var tail = ""
    var tailUsed = 0
    for character in text.reversed() {
      let width = of(String(character))
      if tailUsed + width > columns - 1 - used { break }
      tail.insert(character, at: tail.startIndex)
      tailUsed += width
    }
    return head + "…" + tail
  }

  /// `text` followed by spaces up to `columns` columns.
  static func padded(_ text: String, to columns: Int) -> String {
    text + String(repeating: " ", count: max(0, columns - of(text)))
  }
}

/// Seconds on the monotonic clock.
enum Monotonic {
  static func seconds() -> Double {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
  }
}

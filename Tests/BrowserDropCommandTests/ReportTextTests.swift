import BrowserDrop
import Foundation
import Testing

@testable import browserdrop

/// What the three displays make of each report, in process: request-controlled text never
/// reaches a terminal raw, and the JSON form of the events that a test on 127.0.0.1 can't
/// provoke has the documented keys.
@Suite("Report text")
struct ReportTextTests {
  /// A name with everything a terminal would act on: ESC sequences (clear screen, set title),
  /// BEL, CR, LF, DEL, a C1 CSI, bidirectional overrides and isolates, line and paragraph
  /// separators.
  static let hostile =
    "a\u{1B}[2J\u{1B}]0;owned\u{7}b\r\nc\u{7F}d\u{9B}31me\u{202E}f\u{2066}g\u{2028}h\u{2029}.txt"

  static func isRaw(_ text: String) -> Bool {
    text.unicodeScalars.contains(where: TerminalText.isUnsafe)
  }

  @Test("The QR code has a quiet zone of 4 light modules on every side")
  func qrQuietZone() throws {
    let lines = try #require(QRCode.lines(for: "http://192.168.1.20:8080/"))
    // Each line is two module rows; strip the colour codes to see the cells.
    let cells = lines.map { line in
      Array(line.replacing("\u{1B}[30;107m", with: "").replacing("\u{1B}[0m", with: ""))
    }
    let width = try #require(cells.first?.count)
    #expect(cells.allSatisfy { $0.count == width })
    let modules = width - 8
    #expect(modules >= 21 && (modules - 21) % 4 == 0, "QR side \(modules)")
    // Top: two lines (four module rows) of light; bottom: at least as many.
    #expect(cells.prefix(2).allSatisfy { $0.allSatisfy { $0 == " " } })
    #expect(!cells[2].allSatisfy { $0 == " " })
    let lastDark = try #require(cells.lastIndex { $0.contains { $0 != " " } })
    #expect(cells[lastDark].allSatisfy { $0 == " " || $0 == "▀" }, "lower half must be light")
    #expect(cells.count - 1 - lastDark == 2)
    // Left and right: four light columns, and the code's finder patterns right inside them.
    #expect(cells.allSatisfy { $0.prefix(4).allSatisfy { $0 == " " } })
    #expect(cells.allSatisfy { $0.suffix(4).allSatisfy { $0 == " " } })
    #expect(cells.contains { $0[4] != " " } && cells.contains { $0[width - 5] != " " })
  }

  @Test("Counts and verbs agree: 2 batches wait, 1 batch waits, 1 file is")
  func wording() {
    #expect(ReportText.count(2, "batch") == "2 batches")
    #expect(ReportText.count(1, "batch") == "1 batch")
    #expect(ReportText.count(0, "file") == "0 files")
    #expect(ReportText.count(1, "file") == "1 file")
    #expect(
      KioskCommand.stoppedMessage(waiting: 2)
        == "Stopped. 2 batches wait in the outbox and will be forwarded at the next start.")
    #expect(
      KioskCommand.stoppedMessage(waiting: 1)
        == "Stopped. 1 batch waits in the outbox and will be forwarded at the next start.")
    #expect(KioskCommand.stoppedMessage(waiting: 0) == "Stopped.")
    #expect(
      KioskCommand.recoveredMessage(batches: 3)
        == "3 batches from an earlier run wait in the outbox; forwarding them first.")
    #expect(
      KioskCommand.recoveredMessage(batches: 1)
        == "1 batch from an earlier run waits in the outbox; forwarding it first.")
    #expect(
      ReportText.lines(for: .kept(staging: "/srv/received", files: 1, bytes: 1))
        == ["Received 1 file (1 B); it is in /srv/received"])
    #expect(
      ReportText.lines(for: .kept(staging: "/srv/received", files: 2, bytes: 2))
        == ["Received 2 files (2 B); they are in /srv/received"])
    #expect(
      ReportText.lines(for: .batchClosed(name: "b", files: 2, bytes: 2, handedOver: 0))
        == ["Batch b closed: 2 files (2 B)."])
    #expect(
      ReportText.lines(for: .batchClosed(name: "b", files: 1, bytes: 1, handedOver: 1))
        == ["Batch b closed: 1 file (1 B); 1 waiting connection went to the next batch."])
  }

  @Test("Control characters, bidirectional overrides and separators become visible escapes")
  func escaping() {
    let escaped = TerminalText.escaped(Self.hostile)
    #expect(!Self.isRaw(escaped))
    #expect(escaped.hasPrefix("a\\u{1B}[2J\\u{1B}]0;owned\\u{7}b\\u{D}\\u{A}c\\u{7F}d\\u{9B}31m"))
    #expect(escaped.hasSuffix("e\\u{202E}f\\u{2066}g\\u{2028}h\\u{2029}.txt"))
    // Ordinary text, accents, CJK and emoji stay as they are.
    let ordinary = "Fotos/Café 日本 🎉 (1).jpg"
    #expect(TerminalText.escaped(ordinary) == ordinary)
  }

  @Test("Every report that carries request text prints it escaped (plain and terminal lines)")
  func reportsEscapeRequestText() {
    let upload = Upload(id: 1, relativePath: Self.hostile, size: 10)
    let file = ReceivedFile(
      relativePath: Self.hostile, size: 10, url: URL(filePath: "/tmp/x"), receivedAt: Date(),
      mimeType: "text/plain\u{1B}[31m", kind: .text)
    let reports: [Report] = [
      .server(.uploadStarted(upload)),
      .server(.uploadFinished(file)),
      .server(.uploadFailed(upload, .connectionLost)),
      .server(.uploadFailed(upload, .unsupportedType(Self.hostile))),
      .server(.uploadFailed(upload, .writeFailed(Self.hostile))),
      .forwardStarted(destination: Self.hostile),
      .forwardFailed(message: Self.hostile, staging: Self.hostile),
      .kept(staging: Self.hostile, files: 1, bytes: 10),
      .stopped(message: Self.hostile, staging: Self.hostile),
      .notice(Self.hostile),
      .batchClosed(name: Self.hostile, files: 1, bytes: 10, handedOver: 2),
    ]
    for report in reports {
      let lines = ReportText.lines(for: report)
      #expect(!lines.isEmpty, "\(report)")
      for line in lines {
        #expect(!Self.isRaw(line), "\(report): \(line.debugDescription)")
      }
    }
    // The live line of an upload in flight on the terminal.
    var meter = UploadMeter(upload: Upload(id: 2, relativePath: Self.hostile, size: 1000), now: 0)
    meter.update(receivedBytes: 400, now: 1)
    let line = meter.line(columns: 200)
    #expect(!Self.isRaw(line), "\(line.debugDescription)")
    #expect(line.contains("40%") && line.contains("/s") && line.contains("left"), "\(line)")
  }

  @Test("JSON lines escape the same characters and still round-trip the exact name")
  func jsonEscapes() throws {
    let upload = Upload(id: 1, relativePath: Self.hostile, size: 10)
    let members = try #require(JSONReporter.members(for: .server(.uploadStarted(upload))))
    let line = JSONValue.object(members).serialized
    #expect(!Self.isRaw(line), "\(line.debugDescription)")
    let object = try #require(
      try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    #expect(object["path"] as? String == Self.hostile)
    #expect(object["event"] as? String == "uploadStarted")
    #expect(object["size"] as? Int == 10)
  }

  @Test("addressesChanged: JSON keys, and the plain lines with each address's kind")
  func addressesChanged() throws {
    let addresses = [
      Address(host: "192.168.1.20", port: 8080, kind: .wired, interface: "eth0"),
      Address(host: "10.42.0.1", port: 8080, kind: .hotspot, interface: "wlan0"),
    ]
    let members = try #require(
      JSONReporter.members(for: .server(.addressesChanged(addresses))))
    let object = try #require(
      try JSONSerialization.jsonObject(with: Data(JSONValue.object(members).serialized.utf8))
        as? [String: Any])
    #expect(object["event"] as? String == "addressesChanged")
    let list = try #require(object["addresses"] as? [[String: String]])
    #expect(
      list == [
        ["url": "http://192.168.1.20:8080/", "kind": "wired", "interface": "eth0"],
        ["url": "http://10.42.0.1:8080/", "kind": "hotspot", "interface": "wlan0"],
      ])
    #expect(
      ReportText.lines(for: .server(.addressesChanged(addresses))) == [
        "The addresses changed:",
        "  http://192.168.1.20:8080/  (wired, eth0)",
        "  http://10.42.0.1:8080/  (hotspot, wlan0)",
      ])
  }
}

// A small host program for the browser tests (Tests/Browser): it runs a real BrowserDropServer on
// 127.0.0.1 with a free port, prints one JSON line per event on stdout, and obeys commands read
// line by line from stdin. It adds nothing to the library; every flag maps to a Configuration field.
//
//   BrowserDropTestHost --staging DIR [--allow mp3,txt] [--max-file-size N] [--reserved-free-space N]
//       [--max-concurrent N] [--title T] [--language L] [--accent #RRGGBB] [--strings FILE.json]
//       [--no-durability] [--no-sniffing] [--resumable] [--bind ADDRESS|all] [--port N]
//
// Output: {"event":"listening","url":"http://127.0.0.1:PORT/","port":PORT} first, then
// uploadStarted / uploadFinished / uploadFailed / addressesChanged / interrupted lines (with
// --resumable also uploadPaused / uploadResumed from `pauses`), and the
// answers to commands (suspended, resumed, finished, cancelled, error).
// Commands: suspend, resume, finish (prints the session folder, then exits), cancel (exits).
// End of input cancels the session and exits.
import BrowserDrop
import Foundation

/// Writes whole lines to stdout, one writer at a time, flushed at once.
final class LineWriter: Sendable {
  private let lock = NSLock()

  func emit(_ object: [String: Any]) {
    guard
      let data = try? JSONSerialization.data(
        withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
    else { return }
    lock.lock()
    defer { lock.unlock() }
    FileHandle.standardOutput.write(data + Data("\n".utf8))
  }
}

let output = LineWriter()

func fail(_ message: String) -> Never {
  FileHandle.standardError.write(Data("BrowserDropTestHost: \(message)\n".utf8))
  exit(2)
}

// MARK: - Arguments

var configuration = BrowserDropServer.Configuration()
configuration.port = 0
configuration.bindAddress = "127.0.0.1"
var staging: String?
var arguments = CommandLine.arguments.dropFirst()

@MainActor func value(after flag: String) -> String {
  guard let next = arguments.popFirst() else { fail("\(flag) needs a value") }
  return next
}

@MainActor func integer(after flag: String) -> Int {
  let text = value(after: flag)
  guard let number = Int(text) else { fail("\(flag) needs a whole number, got \(text)") }
  return number
}

while let flag = arguments.popFirst() {
  switch flag {
  case "--staging": staging = value(after: flag)
  case "--allow":
    configuration.allowedExtensions = Set(
      value(after: flag).split(separator: ",").map { $0.lowercased() })
  case "--max-file-size": configuration.maximumFileSize = integer(after: flag)
  case "--reserved-free-space": configuration.reservedFreeSpace = integer(after: flag)
  case "--max-concurrent": configuration.maximumConcurrentUploads = integer(after: flag)
  case "--title": configuration.pageSettings.title = value(after: flag)
  case "--language": configuration.pageSettings.language = value(after: flag)
  case "--accent": configuration.pageSettings.accentColor = value(after: flag)
  case "--strings":
    let path = value(after: flag)
    guard let data = FileManager.default.contents(atPath: path),
      let strings = try? JSONSerialization.jsonObject(with: data) as? [String: String]
    else { fail("--strings needs a JSON file holding an object of strings: \(path)") }
    configuration.pageSettings.strings = strings
  case "--no-durability": configuration.durability = false
  case "--no-sniffing": configuration.contentPolicy = .off
  case "--resumable": configuration.resumableUploads = ResumableUploads()
  case "--port": configuration.port = integer(after: flag)
  case "--bind":
    let address = value(after: flag)
    configuration.bindAddress = address == "all" ? nil : address
  default: fail("unknown argument \(flag)")
  }
}
guard let staging else { fail("--staging DIR is required") }
configuration.stagingRoot = URL(fileURLWithPath: staging, isDirectory: true)

// MARK: - Session

func describe(_ upload: Upload) -> [String: Any] {
  ["id": upload.id, "path": upload.relativePath, "size": upload.size]
}

func reasonCode(_ reason: FailureReason) -> String {
  switch reason {
  case .connectionLost: "connectionLost"
  case .timedOut: "timedOut"
  case .pathConflict: "pathConflict"
  case .unsupportedType: "unsupportedType"
  case .insufficientStorage: "insufficientStorage"
  case .writeFailed: "writeFailed"
  case .cancelled: "cancelled"
  }
}

func describe(_ addresses: [Address]) -> [[String: Any]] {
  addresses.map {
    ["url": $0.url.absoluteString, "kind": $0.kind.rawValue, "interface": $0.interface]
  }
}

func listeningURL(_ addresses: [Address]) -> Address? {
  addresses.first { $0.host == "127.0.0.1" } ?? addresses.first
}

let server = BrowserDropServer(configuration: configuration)

let addresses: [Address]
do {
  addresses = try await server.start()
} catch {
  fail("can't start: \(error)")
}
guard let address = listeningURL(addresses) else { fail("the server reported no address") }
output.emit([
  "event": "listening", "url": address.url.absoluteString, "port": address.port,
  "addresses": describe(addresses),
])

let eventPrinter = Task {
  for await event in server.events {
    switch event {
    case .uploadStarted(let upload):
      output.emit(["event": "uploadStarted"].merging(describe(upload)) { a, _ in a })
    case .uploadFinished(let file):
      output.emit([
        "event": "uploadFinished", "path": file.relativePath, "size": file.size,
        "file": file.url.path, "mimeType": file.mimeType ?? NSNull(),
      ])
    case .uploadFailed(let upload, let reason):
      output.emit(
        ["event": "uploadFailed", "reason": reasonCode(reason), "detail": reason.description]
          .merging(describe(upload)) { a, _ in a })
    case .addressesChanged(let addresses):
      output.emit([
        "event": "addressesChanged", "urls": addresses.map(\.url.absoluteString),
        "addresses": describe(addresses),
      ])
    case .interrupted:
      output.emit(["event": "interrupted"])
    }
  }
}

let pausePrinter = Task {
  for await pause in server.pauses {
    switch pause {
    case .paused(let upload, let keptBytes):
      output.emit(
        ["event": "uploadPaused", "keptBytes": keptBytes].merging(describe(upload)) { a, _ in a })
    case .resumed(let upload, let offset):
      output.emit(
        ["event": "uploadResumed", "offset": offset].merging(describe(upload)) { a, _ in a })
    }
  }
}

// MARK: - Commands

/// Reads stdin on its own thread, so a blocking read never holds a thread of the cooperative pool.
let commands = AsyncStream<String> { continuation in
  let reader = Thread {
    while let line = readLine(strippingNewline: true) {
      continuation.yield(line.trimmingCharacters(in: .whitespaces))
    }
    continuation.finish()
  }
  reader.start()
}

var ended = false
commandLoop: for await command in commands {
  switch command {
  case "":
    continue
  case "suspend":
    await server.suspend()
    output.emit(["event": "suspended"])
  case "resume":
    do {
      try await server.resume()
      let addresses = await server.addresses
      output.emit([
        "event": "resumed", "url": listeningURL(addresses)?.url.absoluteString ?? NSNull(),
      ])
    } catch {
      output.emit(["event": "error", "command": command, "message": "\(error)"])
    }
  case "finish":
    do {
      let folder = try await server.finish()
      output.emit(["event": "finished", "folder": folder?.path ?? NSNull()])
    } catch {
      output.emit(["event": "error", "command": command, "message": "\(error)"])
    }
    ended = true
    break commandLoop
  case "cancel":
    await server.cancel()
    output.emit(["event": "cancelled"])
    ended = true
    break commandLoop
  default:
    output.emit(["event": "error", "command": command, "message": "unknown command"])
  }
}

// End of input without finish or cancel: leave nothing behind.
if !ended { await server.cancel() }
eventPrinter.cancel()
pausePrinter.cancel()
exit(0)

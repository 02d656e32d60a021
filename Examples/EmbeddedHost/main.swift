// The seed's Quick start as a Linux program: start a session, print where to go, follow events
// and progress, and when Enter is pressed take the folder and move it into an inbox.
//
//   swift run EmbeddedHost [INBOX]      (default inbox: ./Inbox)
import BrowserDrop
import Dispatch
import FoundationEssentials

let inbox = URL(
  filePath: CommandLine.arguments.dropFirst().first ?? "Inbox", directoryHint: .isDirectory)

let server = BrowserDropServer(
  configuration: .init(pageSettings: .init(title: "EmbeddedHost"), port: 8080))

// Leftovers of a session that crashed last time are not ours to keep.
BrowserDropServer.removeLeftovers()

let addresses = try await server.start()
print("Open \(addresses.first?.url.absoluteString ?? "?") in a browser on this network.")
print("Press Enter when the person is done.")

// Follow what arrives (a single consumer).
let events = Task {
  for await event in server.events {
    switch event {
    case .uploadFinished(let file): print("Got \(file.relativePath) (\(file.size) bytes)")
    case .uploadFailed(let upload, let reason): print("Lost \(upload.relativePath): \(reason)")
    case .addressesChanged(let addresses): print("Now at \(addresses.map(\.url))")
    case .interrupted: try? await server.resume()
    case .uploadStarted: break
    }
  }
}

// A progress readout: the newest list only, so a slow reader never falls behind.
let progress = Task {
  for await uploads in server.progress where !uploads.isEmpty {
    let received = uploads.reduce(0) { $0 + $1.receivedBytes }
    let total = uploads.reduce(0) { $0 + $1.upload.size }
    print("  \(uploads.count) in flight, \(received) of \(total) bytes")
  }
}

// Enter ends the session. readLine blocks, so it runs on a Dispatch thread, not the task pool's.
await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
  DispatchQueue.global().async {
    _ = readLine()
    continuation.resume()
  }
}

// The person is done: take the folder holding everything that arrived, laid out as they sent it.
if let folder = try await server.finish() {
  try FileManager.default.createDirectory(at: inbox, withIntermediateDirectories: true)
  let target = inbox.appending(path: "Drop \(Int(Date().timeIntervalSince1970))")
  try FileManager.default.moveItem(at: folder, to: target)
  print("Moved what arrived to \(target.path)")
} else {
  print("Nothing arrived.")
}
await events.value
await progress.value

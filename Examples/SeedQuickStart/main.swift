// swift-format-ignore-file
// (The middle of this file is the seed's Quick start character for character, layout included.)
//
// The seed's Quick start (shared/seeds/swift-browser-drop.txt), built unchanged: the lines
// between the two markers below are its code blocks in its order, as written there. Around them
// is only what the seed leaves to the reader (the imports and an `inbox`), the launch-time
// `removeLeftovers()` its "On iOS" section asks for, and a summary printed for
// SeedQuickStartTests, which runs this program in a network namespace of its own.
//
//   swift run SeedQuickStart [INBOX]      (default inbox: ./Inbox)
//
// As in the seed, it listens on port 80 (8080 when 80 is taken or not permitted) on every
// interface, and finishes at once: Examples/EmbeddedHost is the program that waits for files.
import BrowserDrop
import Foundation

let inbox = URL(filePath: CommandLine.arguments.dropFirst().first ?? "Inbox")

// "Call BrowserDropServer.removeLeftovers() at launch, before creating a server."
BrowserDropServer.removeLeftovers()

// ---- the seed's Quick start, verbatim ----
let server = BrowserDropServer(configuration: .init(
  allowedExtensions: ["mp3", "m4a", "m4b"],
  pageSettings: .init(title: "My App")
))

// Show the person where to go, for example http://192.168.1.20/
let addresses = try await server.start()
let url = addresses.first?.url

// Follow what arrives (a single consumer).
Task {
  for await event in server.events {
    switch event {
    case .uploadFinished(let file): print("Got \(file.relativePath)")
    case .addressesChanged(let addresses): print("Now at \(addresses.map(\.url))")
    case .interrupted: try? await server.resume()
    default: break
    }
  }
}

Task {
  for await uploads in server.progress {
    for item in uploads { print(item.upload.relativePath, item.receivedBytes, "of", item.upload.size) }
  }
}

// The person is done: take the folder holding everything that arrived, laid out as they sent it.
if let folder = try await server.finish() {
  // It's yours now: move it where your app keeps things, or import from it and delete it.
  try FileManager.default.moveItem(at: folder, to: inbox)
}

// Or they cancelled: delete it all.
await server.cancel()
// ---- end of the seed's code ----

print("url: \(url?.absoluteString ?? "none")")
print("addresses: \(addresses.map { "\($0.kind.rawValue) \($0.interface) \($0.url.absoluteString)" })")
print("received: \(await server.receivedFiles.count)")

// Runs a real BrowserDropServer into an environment failure that can't be staged inside the test
// process (its other tests share the process's descriptor table and event loop), and prints what
// the host program saw, one line per step. The test (EnvironmentFailureTests) reads the lines; a
// crash shows as a signal exit status instead.
//
//   BrowserDropFaultHost descriptors STAGING   start() with 0, 1, 2… descriptors left
//   BrowserDropFaultHost event-loop STAGING    epoll_wait fails while listening, then resume()
import BrowserDrop
import BrowserDropSystem
import FoundationEssentials
import Glibc

/// Writes `line` to standard output at once (unbuffered), so the test reads every step even when
/// a later one crashes the process.
func say(_ line: String) {
  let bytes = Array((line + "\n").utf8)
  _ = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
}

let arguments = CommandLine.arguments
guard arguments.count == 3 else {
  say("usage: BrowserDropFaultHost descriptors|event-loop STAGING")
  exit(2)
}
var configuration = BrowserDropServer.Configuration()
configuration.port = 0
configuration.bindAddress = "127.0.0.1"
configuration.stagingRoot = URL(filePath: arguments[2])

switch arguments[1] {
case "descriptors":
  // libdispatch, under Swift's concurrency runtime, makes its own epoll set when its first worker
  // thread and timer start, and traps when it can't: a host has always run that far before it
  // could run out of descriptors, so this one does too.
  await withTaskGroup(of: Void.self) { group in
    for _ in 0..<4 { group.addTask { try? await Task.sleep(for: .milliseconds(5)) } }
  }
  // Every descriptor number taken but `spare`, for spare = 0, 1, 2…: each call of start() that
  // opens what it needs fails at a later step than the one before, until one succeeds.
  func holdAll() -> [Int32] {
    var held: [Int32] = []
    while true {
      let fd = open("/dev/null", O_RDONLY | O_CLOEXEC)
      if fd < 0 { return held }
      held.append(fd)
    }
  }
  for spare in 0...64 {
    var held = holdAll()
    for _ in 0..<min(spare, held.count) { close(held.removeLast()) }
    let server = BrowserDropServer(configuration: configuration)
    var started = false
    do {
      try await server.start()
      started = true
      say("\(spare): started")
    } catch let error as BrowserDropError {
      say("\(spare): BrowserDropError: \(error)")
    } catch {
      say("\(spare): other error: \(error)")
    }
    await server.cancel()
    for fd in held { close(fd) }
    if started { break }
  }
case "event-loop":
  let server = BrowserDropServer(configuration: configuration)
  do {
    try await server.start()
  } catch {
    say("start failed: \(error)")
    exit(1)
  }
  say("listening")
  var events = server.events.makeAsyncIterator()
  server.failEventLoopForTesting(EBADF)
  while let event = await events.next() {
    if case .interrupted = event {
      say("interrupted")
      break
    }
  }
  do {
    try await server.resume()
    say("resumed on port \(await server.port ?? -1)")
  } catch {
    say("resume failed: \(error)")
  }
  await server.cancel()
default:
  say("unknown mode \(arguments[1])")
  exit(2)
}

// Runs a real BrowserDropServer into an environment failure that can't be staged inside the test
// process (its other tests share the process's descriptor table and event loop), and prints what
// the host program saw, one line per step. The test (EnvironmentFailureTests) reads the lines; a
// crash shows as a signal exit status instead.
//
//   BrowserDropFaultHost descriptors STAGING   one server's start() with 0, 1, 2… descriptors left
//   BrowserDropFaultHost event-loop STAGING    epoll_wait fails while listening, then resume()
//   BrowserDropFaultHost accept-full STAGING   a connection arrives while accept4 fails with
//                                              EMFILE; descriptors are freed, nothing else
//                                              arrives: is it answered?
//   BrowserDropFaultHost append FILE RECORD…   Durable.append of each RECORD (plus a newline)
//                                              under the file size limit the test set, with
//                                              SIGXFSZ ignored: "ok" or the error, one a line
//
// Exit status 75 (with a line saying so on standard error): libdispatch, not the library, ended
// the process while it held every descriptor (`reportTrapsInsideDispatch`); the test runs the
// case again.
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

/// A blocking TCP socket connected to 127.0.0.1:`port`; a negative number when it could not be
/// made or connected (`errno` says why).
func connectedSocket(port: Int) -> Int32 {
  let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
  guard fd >= 0 else { return fd }
  var address = sockaddr_in()
  address.sin_family = sa_family_t(AF_INET)
  address.sin_port = in_port_t(UInt16(port).bigEndian)
  address.sin_addr.s_addr = inet_addr("127.0.0.1")
  let connected = withUnsafePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
      connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
    }
  }
  guard connected == 0 else {
    let code = errno
    close(fd)
    errno = code
    return -1
  }
  return fd
}

/// `GET /config.json` from 127.0.0.1:`port`, and the status line of the answer, to prove the
/// server answers through its current event loop.
func statusLine(port: Int) async -> String {
  let fd = connectedSocket(port: port)
  guard fd >= 0 else { return "connect failed: errno \(errno)" }
  defer { close(fd) }
  return await statusLine(over: fd)
}

/// `GET /config.json` over `fd`, already connected, on a thread of its own: the status line, or
/// why there is none (10 s without an answer: "no answer"). The thread has ended when it
/// returns: a CI run once saw the process report a crash as it exited (exit status 0, a
/// `swift-backtrace` line on its output) while this thread was still being shut down.
func statusLine(over fd: Int32) async -> String {
  let client = BlockingPool.serial(name: "bd-fault-client")
  let line = await client.run { () -> String in
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    let request = Array("GET /config.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
    _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    var reply: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while !reply.contains(UInt8(ascii: "\n")) {
      let count = recv(fd, &chunk, chunk.count, 0)
      if count <= 0 { return reply.isEmpty ? "no answer" : "cut short" }
      reply += chunk[..<count]
    }
    let line = reply.split(separator: UInt8(ascii: "\r")).first ?? []
    return String(decoding: line, as: UTF8.self)
  }
  await client.shutdown()
  return line
}

/// The action SIGILL had before `reportTrapsInsideDispatch`, put back for a trap elsewhere.
nonisolated(unsafe) var previousIllegalInstructionAction = sigaction()

/// Where libdispatch's code is mapped (start, end), read before any descriptor is held: the
/// signal handler can only compare numbers.
nonisolated(unsafe) var dispatchCode: [(UInt, UInt)] = []

/// Turns a trap inside libdispatch while the process is out of descriptors into exit status 75
/// and a line on standard error; any other trap (the library's, the Swift runtime's,
/// libdispatch's with descriptors to spare) crashes as before.
///
/// libdispatch's thread-pool monitor on Linux opens `/proc/<tid>/stat` of each worker once a
/// second while a global queue has work waiting, and ends the process when that open fails
/// ("registered worker exited prematurely"). While this host holds every descriptor on purpose,
/// a loaded machine (work waiting for a CPU at the monitor's tick) meets that trap: about one
/// run in seven with four busy loops on two CPUs. It says nothing about the library, so the test
/// tells it apart from a real crash instead of failing.
func reportTrapsInsideDispatch() {
  let maps = (try? String(contentsOfFile: "/proc/self/maps", encoding: .utf8)) ?? ""
  dispatchCode = maps.split(separator: "\n").compactMap { line in
    let fields = line.split(separator: " ", omittingEmptySubsequences: true)
    guard fields.count >= 6, fields[1].contains("x"), fields[5].contains("libdispatch") else {
      return nil
    }
    let bounds = fields[0].split(separator: "-").compactMap { UInt($0, radix: 16) }
    return bounds.count == 2 ? (bounds[0], bounds[1]) : nil
  }
  var action = sigaction()
  action.__sigaction_handler.sa_sigaction = { _, info, _ in
    // A fault (si_code > 0; a SIGILL sent by a process has none) inside libdispatch's code, with
    // no descriptor left: the monitor's failed open.
    let sent = (info?.pointee.si_code ?? 0) <= 0
    let address = UInt(bitPattern: info?.pointee._sifields._sigfault.si_addr)
    let savedErrno = errno
    defer { errno = savedErrno }
    if !sent, dispatchCode.contains(where: { $0.0 <= address && address < $0.1 }) {
      let probe = open("/dev/null", O_RDONLY | O_CLOEXEC)
      if probe < 0, errno == EMFILE {
        let line: StaticString = "trap inside libdispatch while out of descriptors\n"
        _ = write(2, line.utf8Start, line.utf8CodeUnitCount)
        _exit(75)
      }
      if probe >= 0 { close(probe) }
    }
    // Not that trap: under the action it had, the instruction traps again on return; a signal
    // sent is sent again.
    sigaction(SIGILL, &previousIllegalInstructionAction, nil)
    if sent { raise(SIGILL) }
  }
  action.sa_flags = SA_SIGINFO
  sigaction(SIGILL, &action, &previousIllegalInstructionAction)
}

/// Every descriptor number this process may still open, taken (on `/dev/null`).
func holdAllDescriptors() -> [Int32] {
  var held: [Int32] = []
  while true {
    let fd = open("/dev/null", O_RDONLY | O_CLOEXEC)
    if fd < 0 { return held }
    held.append(fd)
  }
}

let arguments = CommandLine.arguments
guard arguments.count == 3 || (arguments.count > 3 && arguments[1] == "append") else {
  say("usage: BrowserDropFaultHost descriptors|event-loop STAGING | append FILE RECORD…")
  exit(2)
}
var configuration = BrowserDropServer.Configuration()
configuration.port = 0
configuration.bindAddress = "127.0.0.1"
configuration.stagingRoot = URL(filePath: arguments[2])
reportTrapsInsideDispatch()

switch arguments[1] {
case "descriptors":
  // A small table, so taking every number is quick whatever the machine's default limit.
  var limit = rlimit(rlim_cur: 256, rlim_max: 256)
  guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else {
    say("setrlimit failed: errno \(errno)")
    exit(1)
  }
  // libdispatch, under Swift's concurrency runtime, makes its own epoll set when its first worker
  // thread and timer start, and traps when it can't: a host has always run that far before it
  // could run out of descriptors, so this one does too.
  await withTaskGroup(of: Void.self) { group in
    for _ in 0..<4 { group.addTask { try? await Task.sleep(for: .milliseconds(5)) } }
  }
  // Every descriptor number taken but `spare`, for spare = 0, 1, 2…: each start() of the same
  // server opens what it needs and fails at a later step than the one before, until one
  // succeeds; what a failed start made must not stand in the way of the next.
  let server = BrowserDropServer(configuration: configuration)
  for spare in 0...64 {
    var held = holdAllDescriptors()
    for _ in 0..<min(spare, held.count) { close(held.removeLast()) }
    var started = false
    do {
      try await server.start()
      started = true
    } catch let error as BrowserDropError {
      say("\(spare): BrowserDropError: \(error)")
    } catch {
      say("\(spare): other error: \(error)")
    }
    for fd in held { close(fd) }
    if started {
      say("\(spare): started, answers \(await statusLine(port: await server.port ?? 0))")
      break
    }
  }
  await server.cancel()
case "event-loop":
  let server = BrowserDropServer(configuration: configuration)
  do {
    try await server.start()
  } catch {
    say("start failed: \(error)")
    exit(1)
  }
  say("listening, answers \(await statusLine(port: await server.port ?? 0))")
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
    say("resumed, answers \(await statusLine(port: await server.port ?? 0))")
  } catch {
    say("resume failed: \(error)")
  }
  await server.cancel()
case "accept-full":
  var limit = rlimit(rlim_cur: 256, rlim_max: 256)
  guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else {
    say("setrlimit failed: errno \(errno)")
    exit(1)
  }
  let server = BrowserDropServer(configuration: configuration)
  do {
    try await server.start()
  } catch {
    say("start failed: \(error)")
    exit(1)
  }
  let port = await server.port ?? 0
  // The client's socket takes the last free number; the server's accept4 then fails (EMFILE)
  // with the connection established and queued.
  var held = holdAllDescriptors()
  if let last = held.popLast() { close(last) }
  let client = connectedSocket(port: port)
  say(client >= 0 ? "connected while out of descriptors" : "connect failed")
  // Long enough for the accept loop to have met EMFILE (it retries every 50 ms meanwhile).
  try? await Task.sleep(for: .milliseconds(300))
  for fd in held.suffix(8) { close(fd) }
  held.removeLast(min(8, held.count))
  // Nothing else arrives: the queued connection must be accepted without another edge.
  say("answers \(await statusLine(over: client))")
  close(client)
  for fd in held { close(fd) }
  await server.cancel()
case "append":
  // A write past RLIMIT_FSIZE then fails with EFBIG (after a short write of what still fits)
  // instead of ending the process.
  signal(SIGXFSZ, SIG_IGN)
  for record in arguments[3...] {
    do {
      try Durable.append(Array((record + "\n").utf8), to: arguments[2])
      say("ok")
    } catch {
      say("\(error)")
    }
  }
default:
  say("unknown mode \(arguments[1])")
  exit(2)
}

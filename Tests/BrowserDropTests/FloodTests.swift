import BrowserDropTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

@testable import BrowserDrop

/// A connection flood against the real server while a real upload runs: the cap holds, memory
/// stays flat, the upload gets in and completes, and the server is back to normal within
/// `idleTimeout` after the flood stops.
@Suite("Load: a flood of silent and trickling connections")
struct FloodTests {
  /// The server's own connection sockets: descriptors of this process (the server runs
  /// in-process) whose TCP socket has the server's port as its local port, listener excluded.
  ///
  /// The listing of /proc/self/fd is not a snapshot: a descriptor listed and then closed, its
  /// connection ended, and another one accepted under a number the listing has not reached yet
  /// would both count. So each counted descriptor is looked at again at the end, and one that
  /// names another socket by then (or none) is left out: the count is of descriptors open from
  /// the listing to the end of the sample, never more than were open at once.
  static func serverConnectionDescriptors(port: Int) -> Int {
    var sockets: [String: String] = [:]  // descriptor number → socket inode
    if let names = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
      for name in names {
        if let inode = socketInode(ofDescriptor: name) { sockets[name] = inode }
      }
    }
    let portHex = String(format: "%04X", port)
    var serverInodes = Set<String>()
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
      let text = readAll(file)
      for line in text.split(separator: "\n").dropFirst() {
        let fields = line.split(separator: " ")
        guard fields.count > 9, fields[1].hasSuffix(":" + portHex), fields[3] != "0A" else {
          continue
        }
        serverInodes.insert(String(fields[9]))
      }
    }
    return sockets.filter { name, inode in
      serverInodes.contains(inode) && socketInode(ofDescriptor: name) == inode
    }.count
  }

  /// The inode of the socket descriptor `name` (a number in /proc/self/fd) names now; nil when
  /// it is closed or not a socket.
  static func socketInode(ofDescriptor name: String) -> String? {
    var buffer = [CChar](repeating: 0, count: 64)
    let count = readlink("/proc/self/fd/" + name, &buffer, 63)
    guard count > 0 else { return nil }
    let target = String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    guard target.hasPrefix("socket:[") else { return nil }
    return String(target.dropFirst(8).dropLast())
  }

  /// A /proc file read to its end (Foundation's readers stop after the first chunk of these).
  static func readAll(_ path: String) -> String {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return "" }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 64 * 1024)
    for _ in 0..<1024 {
      let count = read(fd, &chunk, chunk.count)
      if count <= 0 { break }
      bytes += chunk[..<count]
    }
    return String(decoding: bytes, as: UTF8.self)
  }

  /// Resident set size and its high-water mark, in KiB, from /proc/self/status.
  static func memory() -> (rss: Int, peak: Int) {
    let text = readAll("/proc/self/status")
    func value(_ key: String) -> Int {
      guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(key) }) else {
        return 0
      }
      return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
    }
    return (value("VmRSS:"), value("VmHWM:"))
  }

  @Test(.timeLimit(.minutes(1)))
  func aThousandSilentAndTricklingConnectionsNeverExceedTheCap() async throws {
    let cap = 64
    let idle = Duration.seconds(2)
    let session = try await TestSession.start {
      $0.maximumConnections = cap
      $0.idleTimeout = idle
    }
    defer { Task { await session.stop() } }
    let port = session.port
    let startMemory = Self.memory()
    let peakDescriptors = Atomic(0)
    let peakRSS = Atomic(startMemory.rss)
    let flooding = Atomic(true)

    // Samples every 50 ms while the flood lasts (bounded: 400 samples, 20 s).
    let sampler = Task {
      for _ in 0..<400 where flooding.load(ordering: .relaxed) {
        peakDescriptors.max(Self.serverConnectionDescriptors(port: port), ordering: .relaxed)
        peakRSS.max(Self.memory().rss, ordering: .relaxed)
        try? await Task.sleep(for: .milliseconds(50))
      }
    }

    // 1,000 connections over ~10 s: even ones silent, odd ones trickle a head a byte a second.
    let floodStart = ContinuousClock.now
    let flood = Task {
      await withTaskGroup(of: Void.self) { group in
        for index in 0..<1000 {
          try? await Task.sleep(until: floodStart + .milliseconds(10 * index))
          guard let client = try? await RawClient.connect(port: port) else { continue }
          group.addTask {
            if index % 2 == 1 {
              let head = Array("POST /upload?path=t\(index) HTTP/1.1\r\nHost: 127.0.0.1\r\n".utf8)
              for byte in head.prefix(12) {
                guard (try? await client.send([byte])) != nil else { break }
                try? await Task.sleep(for: .seconds(1))
              }
            }
            _ = try? await client.readToEnd(limit: 4096)
            client.socket.close()
          }
        }
      }
    }

    // The real upload, started 1 s into the flood (the cap is full by then, and the first
    // flood connections hold their slots until idleTimeout): retried while it is turned away.
    try await Task.sleep(until: floodStart + .seconds(1))
    let size = 8 << 20
    let body = TestBytes.make(size, seed: 42)
    let tryStart = ContinuousClock.now
    var attempts = 0
    var admitted: RawClient?
    while admitted == nil, attempts < 2000, ContinuousClock.now - tryStart < .seconds(15) {
      attempts += 1
      let client = try await session.client()
      try? await client.send(
        Requests.uploadHead(
          port: port, encodedPath: "real/upload.bin", length: size,
          extra: ["Expect: 100-continue"]))
      if let interim = try? await client.readReply(), interim.status == 100 {
        admitted = client
      } else {
        client.socket.close()
        try await Task.sleep(for: .milliseconds(20))
      }
    }
    let waitedToGetIn = ContinuousClock.now - tryStart
    let client = try #require(admitted, "the real upload never got in (\(attempts) attempts)")
    // 32 pieces of 256 KiB, 250 ms apart: the body keeps arriving during the rest of the flood.
    for piece in 0..<32 {
      try await client.send(Array(body[(piece * size / 32)..<((piece + 1) * size / 32)]))
      try await Task.sleep(for: .milliseconds(250))
    }
    let reply = try await client.readReply()
    #expect(reply.status == 201)
    #expect(session.stagedFiles()["real/upload.bin"] == body)

    await flood.value
    let floodEnd = ContinuousClock.now
    flooding.store(false, ordering: .relaxed)
    await sampler.value
    // Served normally again within idleTimeout of the flood stopping.
    var servedAfter: Duration?
    while servedAfter == nil, ContinuousClock.now - floodEnd < idle + .seconds(1) {
      if (try? await session.get("/config.json").status) == 200 {
        servedAfter = ContinuousClock.now - floodEnd
      } else {
        try await Task.sleep(for: .milliseconds(20))
      }
    }
    let endMemory = Self.memory()
    print(
      "flood: peak server connection fds \(peakDescriptors.load(ordering: .relaxed)) (cap \(cap)),"
        + " RSS start \(startMemory.rss) KiB, peak \(peakRSS.load(ordering: .relaxed)) KiB,"
        + " end \(endMemory.rss) KiB (VmHWM \(endMemory.peak) KiB); real upload got in after"
        + " \(waitedToGetIn) and \(attempts) attempts; served \(servedAfter.map { "\($0)" } ?? "never")"
        + " after the flood; flood lasted \(floodEnd - floodStart)")
    // The refused connection is accepted, then closed at once: one over the cap for an instant.
    // (A peak of 69 was once seen here: a connection whose peer closed before sending a head
    // left its socket to the task's teardown, after the count had dropped. Fixed: every path of
    // Connection.run closes the socket before the count drops. A peak of 66 in a later run came
    // from the sample itself, a closed descriptor and a new one both listed:
    // `serverConnectionDescriptors` now checks each again at the end.)
    let peak = peakDescriptors.load(ordering: .relaxed)
    #expect(peak <= cap + 1)
    #expect(peakRSS.load(ordering: .relaxed) - startMemory.rss < 256 * 1024)
    #expect(servedAfter != nil)
  }
}

import BrowserDropTestSupport
import Foundation
import Glibc
import Testing

@testable import BrowserDrop

@Suite("Session lifecycle: finish, cancel, remove, suspend and resume")
struct SessionLifecycleTests {
  @Test func finishHandsOverTheFolderAndEndsTheSession() async throws {
    let session = try await TestSession.start()
    defer { try? FileManager.default.removeItem(at: session.root) }
    #expect(try await session.upload("Book/01.mp3", [1, 2, 3]).status == 201)
    #expect(try await session.upload("Book/02.mp3", [4]).status == 201)
    let folder = try #require(try await session.server.finish())
    #expect(folder.path == session.server.sessionFolder.path)
    #expect(folder.path.hasPrefix(session.root.standardizedFileURL.path + "/"))
    let names = try FileManager.default.subpathsOfDirectory(atPath: folder.path).sorted()
    #expect(names == ["Book", "Book/01.mp3", "Book/02.mp3"])
    // Nothing but the handed-over folder is left in the staging root.
    #expect(
      try FileManager.default.contentsOfDirectory(atPath: session.root.path) == [
        folder.lastPathComponent
      ])
    // The session is over: no more connections, and a second finish says so.
    await #expect(throws: BrowserDropError.sessionEnded) { try await session.server.finish() }
    await #expect(throws: (any Error).self) { try await session.upload("late.txt", [1]) }
  }

  @Test func finishWithNothingReturnsNilAndRemovesTheFolder() async throws {
    let session = try await TestSession.start()
    defer { try? FileManager.default.removeItem(at: session.root) }
    #expect(try await session.server.finish() == nil)
    #expect(try FileManager.default.contentsOfDirectory(atPath: session.root.path).isEmpty)
  }

  @Test func cancelDeletesEverything() async throws {
    let session = try await TestSession.start()
    defer { try? FileManager.default.removeItem(at: session.root) }
    #expect(try await session.upload("a.txt", [1]).status == 201)
    await session.server.cancel()
    #expect(try FileManager.default.contentsOfDirectory(atPath: session.root.path).isEmpty)
    #expect(await session.server.receivedFiles.isEmpty)
  }

  @Test func removeReceivedItemDropsAFileOrAFolder() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    for path in ["Book/01.mp3", "Book/CD2/02.mp3", "keep.txt", "Bookish.txt"] {
      #expect(try await session.upload(path, [7]).status == 201)
    }
    let removedFile = await session.server.removeReceivedItem(at: "keep.txt")
    #expect(removedFile.map(\.relativePath) == ["keep.txt"])
    let removedFolder = await session.server.removeReceivedItem(at: "Book")
    #expect(Set(removedFolder.map(\.relativePath)) == ["Book/01.mp3", "Book/CD2/02.mp3"])
    #expect(await session.server.receivedFiles.map(\.relativePath) == ["Bookish.txt"])
    #expect(session.stagedFiles().keys.sorted() == ["Bookish.txt"])
    #expect(
      !FileManager.default.fileExists(
        atPath: session.server.sessionFolder.appending(path: "Book").path))
    // The name is free again, in any form.
    #expect(try await session.upload("Book", [1]).status == 201)
  }

  @Test func suspendKeepsFilesAndResumeListensOnTheSamePort() async throws {
    let session = try await TestSession.startOutsideEphemeralPorts()
    defer { Task { await session.stop() } }
    #expect(try await session.upload("before.txt", [1]).status == 201)
    await session.server.suspend()
    await #expect(throws: (any Error).self) { _ = try await session.client() }
    try await session.server.resume()
    #expect(await session.server.addresses.first?.port == session.port)
    #expect(try await session.upload("after.txt", [2]).status == 201)
    #expect(session.stagedFiles().keys.sorted() == ["after.txt", "before.txt"])
  }

  @Test func quickRestartsNeverMeetAddressInUse() async throws {
    let session = try await TestSession.startOutsideEphemeralPorts()
    defer { Task { await session.stop() } }
    for round in 0..<25 {
      // Leave connections in TIME_WAIT on the server side before each restart.
      #expect(try await session.upload("r\(round).txt", [UInt8(round)]).status == 201)
      await session.server.suspend()
      try await session.server.resume()
    }
    #expect(await session.server.receivedFiles.count == 25)
  }

  /// A socket another process holds on the port for a moment (a child forked before `exec`, as
  /// the test suite's own spawned processes did; 100 ms here) delays `resume()`; one held for
  /// good fails it with the port named, after about a second.
  @Test func resumeWaitsBrieflyForAPortStillHeldElsewhere() async throws {
    let session = try await TestSession.startOutsideEphemeralPorts()
    defer { Task { await session.stop() } }
    await session.server.suspend()

    let briefly = try FreePort.silentListener(port: session.port).descriptor
    // Released from a thread of its own: a loaded test process can hold its tasks back for
    // longer than `resume()` keeps trying.
    Thread.detachNewThread {
      usleep(100_000)
      close(briefly)
    }
    try await session.server.resume()
    #expect(await session.server.addresses.first?.port == session.port)
    #expect(try await session.upload("after.txt", [1]).status == 201)

    await session.server.suspend()
    let forGood = try FreePort.silentListener(port: session.port).descriptor
    defer { close(forGood) }
    let started = ContinuousClock.now
    await #expect {
      try await session.server.resume()
    } throws: { error in
      guard case .portUnavailable(let port, _) = error as? BrowserDropError else { return false }
      return port == session.port
    }
    #expect(ContinuousClock.now - started >= .milliseconds(900))
  }

  @Test func suspendCutsAnUploadInFlightAndReportsIt() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let client = try await session.client()
    try await client.send(
      Requests.uploadHead(port: session.port, encodedPath: "cut.bin", length: 1000))
    try await client.send(TestBytes.make(10))
    try await session.log.wait {
      $0.contains { if case .uploadStarted = $0 { true } else { false } }
    }
    await session.server.suspend()
    let events = try await session.log.wait {
      $0.contains { if case .uploadFailed = $0 { true } else { false } }
    }
    #expect(
      events.contains(.uploadFailed(Upload(id: 1, relativePath: "cut.bin", size: 1000), .cancelled))
    )
    #expect(session.incomingEntries().isEmpty)
    #expect(session.stagedFiles().isEmpty)
  }

  @Test func removeLeftoversDeletesSessionsButNothingElse() async throws {
    let root = FileManager.default.temporaryDirectory.appending(
      path: "bd-leftovers-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: root) }
    var configuration = BrowserDropServer.Configuration(port: 0, bindAddress: "127.0.0.1")
    configuration.stagingRoot = root
    let crashed = BrowserDropServer(configuration: configuration)
    try await crashed.start()
    try FileManager.default.createDirectory(
      at: root.appending(path: "outbox"), withIntermediateDirectories: true)
    BrowserDropServer.removeLeftovers(stagingRoot: root)
    #expect(try FileManager.default.contentsOfDirectory(atPath: root.path) == ["outbox"])
    await crashed.cancel()
  }

  @Test func anExplicitPortThatIsTakenThrowsAClearError() async throws {
    let first = try await TestSession.start()
    defer { Task { await first.stop() } }
    var configuration = BrowserDropServer.Configuration(port: first.port, bindAddress: "127.0.0.1")
    configuration.stagingRoot = first.root
    let second = BrowserDropServer(configuration: configuration)
    do {
      try await second.start()
      Issue.record("a second server bound a taken port")
    } catch let error as BrowserDropError {
      guard case .portUnavailable(let port, _) = error else {
        Issue.record("unexpected \(error)")
        return
      }
      #expect(port == first.port)
      #expect(error.description.contains("\(first.port)"))
    }
  }

  @Test func anInvalidBindAddressIsRefused() async throws {
    let server = BrowserDropServer(configuration: .init(port: 0, bindAddress: "not-an-ip"))
    await #expect(throws: BrowserDropError.invalidBindAddress("not-an-ip")) {
      try await server.start()
    }
  }

  @Test func addressesCarryURLsAndKinds() async throws {
    let session = try await TestSession.start()
    defer { Task { await session.stop() } }
    let addresses = await session.server.addresses
    #expect(addresses.count == 1)
    #expect(addresses[0].url.absoluteString == "http://127.0.0.1:\(session.port)/")
    let lan = InterfaceAddresses.current(port: 80, bindAddress: nil)
    #expect(!lan.isEmpty)
    for address in lan {
      #expect(!address.host.hasPrefix("169.254.") && !address.host.hasPrefix("fe80"))
      #expect(
        !["docker", "veth", "virbr", "br-", "tun", "wg"].contains {
          address.interface.hasPrefix($0)
        })
      #expect(address.url.port == nil)
    }
  }
}

@Suite("A lost listener")
struct InterruptedTests {
  /// The descriptor of this process's socket listening on 127.0.0.1:`port`, found the way `ss`
  /// does: the socket's inode from /proc/net/tcp, then the descriptor linking to it.
  static func listeningDescriptor(port: Int) throws -> Int32? {
    // Read to the end: procfs files report no size, and the table is longer than a page when
    // other tests hold many sockets.
    let handle = try #require(FileHandle(forReadingAtPath: "/proc/net/tcp"))
    let table = String(decoding: try handle.readToEnd() ?? Data(), as: UTF8.self)
    let local = String(format: "0100007F:%04X", port)
    var inode: Substring?
    for line in table.split(separator: "\n") {
      let columns = line.split(separator: " ")
      if columns.count > 9, columns[1] == local, columns[3] == "0A" { inode = columns[9] }
    }
    guard let inode else { return nil }
    let target = "socket:[\(inode)]"
    for name in try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
      if (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + name))
        == target
      {
        return Int32(name)
      }
    }
    return nil
  }

  @Test func aListenerTornDownUnderTheServerIsReportedAndResumable() async throws {
    let session = try await TestSession.startOutsideEphemeralPorts()
    defer { Task { await session.stop() } }
    #expect(try await session.upload("before.txt", [1]).status == 201)
    let fd = try #require(try Self.listeningDescriptor(port: session.port))
    // What the kernel does to a listener whose interface or namespace goes away.
    #expect(shutdown(fd, Int32(SHUT_RDWR)) == 0)
    try await session.log.wait { $0.contains(.interrupted) }
    try await session.server.resume()
    #expect(await session.server.addresses.first?.port == session.port)
    #expect(try await session.upload("after.txt", [2]).status == 201)
    #expect(session.stagedFiles().keys.sorted() == ["after.txt", "before.txt"])
  }
}

@Suite("The shared default staging root")
struct SharedStagingRootTests {
  @Test func aFreshRootIsPrivateAndAPlantedOneIsRefused() throws {
    let base = FileManager.default.temporaryDirectory.appending(
      path: "bd-root-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: base) }

    let fresh = base.appending(path: "fresh").path
    try StagingFolder.claimSharedRoot(fresh)
    var info = stat()
    #expect(lstat(fresh, &info) == 0 && info.st_mode & 0o777 == 0o700)
    try StagingFolder.claimSharedRoot(fresh)  // ours, private: accepted again

    let link = base.appending(path: "link").path
    try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: fresh)
    #expect(throws: BrowserDropError.self) { try StagingFolder.claimSharedRoot(link) }

    let open = base.appending(path: "open").path
    #expect(mkdir(open, 0o777) == 0 && chmod(open, 0o777) == 0)
    #expect(throws: BrowserDropError.self) { try StagingFolder.claimSharedRoot(open) }

    let file = base.appending(path: "file").path
    #expect(FileManager.default.createFile(atPath: file, contents: Data()))
    #expect(throws: BrowserDropError.self) { try StagingFolder.claimSharedRoot(file) }
  }
}

@Suite("Port 80 falls back to 8080")
struct PortFallbackTests {
  @Test func port80TakenOrForbiddenFallsBackTo8080() async throws {
    // Hold 127.0.0.1:80 when allowed (root); otherwise binding 80 is forbidden anyway.
    let holder = try? Listener.open(address: "127.0.0.1", port: 80, fallback: false)
    defer { holder?.close() }
    let root = FileManager.default.temporaryDirectory.appending(
      path: "bd-port-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: root) }
    var configuration = BrowserDropServer.Configuration(port: 80, bindAddress: "127.0.0.1")
    configuration.stagingRoot = root
    let server = BrowserDropServer(configuration: configuration)
    do {
      let addresses = try await server.start()
      #expect(addresses.first?.port == 8080)
      #expect(addresses.first?.url.absoluteString == "http://127.0.0.1:8080/")
      await server.cancel()
    } catch BrowserDropError.portUnavailable(let port, _) {
      // Something else on this machine holds 8080 too: the error must name the fallback port.
      #expect(port == 8080)
    }
  }
}

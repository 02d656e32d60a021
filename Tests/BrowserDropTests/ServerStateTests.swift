import BrowserDropTestSupport
import Foundation
import Testing

@testable import BrowserDrop

/// The lifecycle's state is checked again after every `await`: a session ended while it was
/// starting never listens, and two starts share one.
@Suite("Lifecycle: starting, ending meanwhile")
struct ServerStateTests {
  static func makeServer() -> (BrowserDropServer, URL) {
    let root = FileManager.default.temporaryDirectory.appending(path: "bd-state-\(UUID())")
    let server = BrowserDropServer(
      configuration: .init(stagingRoot: root, port: 0, bindAddress: "127.0.0.1"))
    return (server, root)
  }

  @Test(arguments: 0..<10)
  func aSessionCancelledWhileStartingNeverListens(round: Int) async throws {
    let (server, root) = Self.makeServer()
    defer { try? FileManager.default.removeItem(at: root) }
    async let started = Result { try await server.start() }
    await server.cancel()
    let port: Int?
    switch await started {
    case .success(let addresses): port = addresses.first?.port
    case .failure(let error):
      #expect(error as? BrowserDropError == .sessionEnded)
      port = nil
    }
    if let port {
      await #expect(throws: (any Error).self) { _ = try await RawClient.connect(port: port) }
    }
    let left = (try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []
    #expect(left.isEmpty, "\(left)")
    await #expect(throws: BrowserDropError.sessionEnded) { try await server.start() }
  }

  @Test func twoStartsShareOneSession() async throws {
    let (server, root) = Self.makeServer()
    defer { try? FileManager.default.removeItem(at: root) }
    async let first = server.start()
    async let second = server.start()
    let (a, b) = try await (first, second)
    #expect(a == b && !a.isEmpty)
    let sessions = try FileManager.default.contentsOfDirectory(atPath: root.path)
      .filter { $0.hasPrefix(StagingFolder.sessionPrefix) }
    #expect(sessions.count == 1)
    await server.cancel()
  }

  @Test func aFailedStartCanBeTriedAgain() async throws {
    let root = FileManager.default.temporaryDirectory.appending(path: "bd-state-\(UUID())")
    defer { try? FileManager.default.removeItem(at: root) }
    let holder = try Listener.open(address: "127.0.0.1", port: 0, fallback: false)
    let server = BrowserDropServer(
      configuration: .init(stagingRoot: root, port: holder.port, bindAddress: "127.0.0.1"))
    await #expect(throws: BrowserDropError.self) { try await server.start() }
    #expect(await server.port == nil)
    holder.close()
    let addresses = try await server.start()
    #expect(addresses.first?.port == holder.port)
    await server.cancel()
  }
}

extension Result where Failure == any Error {
  fileprivate init(catching body: () async throws -> Success) async {
    do { self = .success(try await body()) } catch { self = .failure(error) }
  }
}

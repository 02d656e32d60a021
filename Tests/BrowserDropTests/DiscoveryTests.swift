import CAvahiLoader
import Foundation
import Glibc
import Synchronization
import Testing

@testable import BrowserDrop

/// `Configuration.localName` without a daemon: the name rule, which addresses get a record, the
/// hand-over of an advertisement between a kiosk's sessions, `config.json`'s `localName`, and the
/// Host rules against every name the server can publish, Avahi's own alternatives included.
/// Publishing itself runs against real avahi-daemons in Tests/Operations/test_avahi.py.
@Suite("Local name (Discovery)")
struct DiscoveryTests {
  @Test("A local name is one DNS label, kept in lower case")
  func names() throws {
    #expect(try LocalName("intake").hostName == "intake.local")
    #expect(try LocalName("Intake.LOCAL.").label == "intake")
    #expect(try LocalName("front-desk-2").description == "front-desk-2.local")
    #expect(try LocalName(String(repeating: "a", count: 63)).label.utf8.count == 63)
    let invalid = ["", "-a", "a-", "a.b", "a b", "ü", "a_b", String(repeating: "x", count: 64)]
    for bad in invalid + [".local"] {
      #expect(throws: LocalName.Invalid.self, "\(bad)") { try LocalName(bad) }
    }
    let error = LocalName.Invalid(text: "a b")
    #expect(error.description.contains("\"a b\"") && error.description.contains("intake.local"))
  }

  @Test("Records only for addresses a phone can use")
  func publishable() {
    let addresses = [
      Address(host: "192.168.1.20", port: 80, kind: .wired, interface: "eth0"),
      Address(host: "127.0.0.1", port: 80, kind: .other, interface: "lo"),
      Address(host: "169.254.3.4", port: 80, kind: .other, interface: "eth0"),
      Address(host: "fe80::1", port: 80, kind: .other, interface: "eth0"),
      Address(host: "2001:db8::5", port: 80, kind: .wifi, interface: "wlan0"),
      Address(host: "intake.local", port: 80, kind: .other, interface: "mDNS"),
      Address(host: "192.168.1.20", port: 80, kind: .wired, interface: "eth0"),
    ]
    #expect(AvahiAdvertiser.publishable(addresses) == ["192.168.1.20", "2001:db8::5"])
  }

  @Test("A session ending leaves its advertisement to the next one for the hand-over time")
  func handOver() {
    typealias Leases = LocalNameLeases<String>
    var leases = Leases()
    let key = Leases.Key(label: "intake", port: 8080)
    var made = 0
    let first = leases.take(key, holder: 1) {
      made += 1
      return "advertisement \(made)"
    }
    #expect(first.advertisement == "advertisement 1" && !first.reused)
    // The batch ends; the next session takes it over before the time is up.
    let generation = leases.release(key, holder: 1)
    #expect(generation != nil)
    let second = leases.take(key, holder: 2) {
      made += 1
      return "advertisement \(made)"
    }
    #expect(second.advertisement == "advertisement 1" && second.reused && made == 1)
    // The first session's expiry then stops nothing.
    #expect(leases.expire(key, generation: generation!) == nil)
    #expect(leases.contains(key))
    // A release by a session that holds nothing changes nothing.
    #expect(leases.release(key, holder: 1) == nil)
    // Another port is another advertisement.
    let other = leases.take(Leases.Key(label: "intake", port: 80), holder: 3) { "other" }
    #expect(other.advertisement == "other" && !other.reused)
    // Two releases: only the newest expiry stops it.
    let older = leases.release(key, holder: 2)!
    _ = leases.take(key, holder: 4) { "unused" }
    let newer = leases.release(key, holder: 4)!
    #expect(newer != older)
    #expect(leases.expire(key, generation: older) == nil)
    #expect(leases.expire(key, generation: newer) == "advertisement 1")
    #expect(!leases.contains(key))
    // Gone: the next session starts a new one.
    #expect(!leases.take(key, holder: 5) { "fresh" }.reused)
  }

  @Test("config.json has localName only while a name is published, and follows it")
  func configuration() throws {
    struct Body: Decodable {
      let protocolVersion: Int
      let localName: String?
    }
    let name = Mutex<LocalName?>(nil)
    let page = PageConfiguration(BrowserDropServer.Configuration()) { name.withLock { $0 } }
    func body() throws -> Body {
      let text = String(decoding: page.response, as: UTF8.self)
      let start = text.range(of: "\r\n\r\n")?.upperBound ?? text.startIndex
      return try JSONDecoder().decode(Body.self, from: Data(text[start...].utf8))
    }
    #expect(try body().localName == nil)
    #expect(try body().protocolVersion == 1)
    #expect(!String(decoding: page.response, as: UTF8.self).contains("localName"))
    name.withLock { $0 = try? LocalName("intake") }
    #expect(try body().localName == "intake.local")
    name.withLock { $0 = try? LocalName("intake-2") }
    #expect(try body().localName == "intake-2.local")
    name.withLock { $0 = nil }
    #expect(try body().localName == nil)
  }

  @Test("Without a name nothing is published and the stream ends at once")
  func noName() async {
    let server = BrowserDropServer(configuration: .init())
    var changes = 0
    for await _ in server.localNameChanges { changes += 1 }
    #expect(changes == 0)
    #expect(server.publishedLocalName == nil)
  }

  @Test(
    "Without avahi-daemon: said once, repeated to the next session, ended after the hand-over",
    .timeLimit(.minutes(1)))
  func withoutDaemon() async throws {
    // libdbus takes the system bus from here: a socket that does not exist, so no daemon
    // answers whatever this machine runs, and nothing is published on any real network.
    setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/browserdrop-discovery-test", 1)
    let root = FileManager.default.temporaryDirectory.appending(path: "bd-name-\(UUID())")
    defer { try? FileManager.default.removeItem(at: root) }
    let clock = ManualClock()
    let name = try LocalName("bd-discovery-test")
    func server(port: Int) -> BrowserDropServer {
      BrowserDropServer(
        configuration: .init(
          reservedFreeSpace: 0, stagingRoot: root, port: port, bindAddress: "127.0.0.1",
          localName: name),
        pageBundle: PageSource.bundledFiles, clock: clock)
    }
    let first = server(port: 0)
    let port = try #require(try await first.start().first?.port)
    var news = first.localNameChanges.makeAsyncIterator()
    let said = await news.next()
    guard case .unavailable(let message) = said else {
      Issue.record("\(String(describing: said))")
      return
    }
    #expect(message.hasPrefix("avahi-daemon isn't running"), "\(message)")
    #expect(message.contains("bd-discovery-test.local isn't advertised"))
    #expect(first.publishedLocalName == nil)
    #expect(LocalNamePublication.isAdvertising(name, port: port))

    // The batch ends; the next session on the same port takes the advertisement over and hears
    // its latest news at once, from no new connection.
    await first.cancel()
    #expect(await news.next() == nil)
    let second = server(port: port)
    _ = try await second.start()
    var later = second.localNameChanges.makeAsyncIterator()
    #expect(await later.next() == said)
    let handOver = LocalNameLeases<LocalNameAdvertisement>.handOverTime
    try await Self.waitForSleeper(on: clock, until: handOver)
    clock.advance(by: handOver)

    // Nobody holds it: it stays for the hand-over time, to the nanosecond, then goes.
    await second.cancel()
    #expect(await later.next() == nil)
    try await Self.waitForSleeper(on: clock, until: handOver * 2)
    clock.advance(by: handOver - .nanoseconds(1))
    #expect(LocalNamePublication.isAdvertising(name, port: port))
    clock.advance(by: .nanoseconds(1))
    // The expiry runs in a task of its own once the clock wakes it: bounded, 5 s at most.
    for _ in 0..<500 where LocalNamePublication.isAdvertising(name, port: port) {
      try await Task.sleep(for: .milliseconds(10))
    }
    #expect(!LocalNamePublication.isAdvertising(name, port: port))
  }

  @Test("The Host rules admit every name the server can publish, and nothing near it")
  func hostRules() throws {
    // Avahi's own alternatives, from its library: what a conflict makes of a name.
    var error = [CChar](repeating: 0, count: 256)
    let loaded = cbd_avahi_load(&error, error.count)
    try #require(loaded == 0, "libavahi-common can't be loaded: \(Self.text(error))")
    func alternative(_ label: String) throws -> String {
      var out = [CChar](repeating: 0, count: 128)
      try #require(cbd_avahi_alternative_host_name(label, &out, out.count) == 0)
      return Self.text(out)
    }
    var labels = ["intake", "a", String(repeating: "k", count: 63)]
    for start in ["intake", String(repeating: "k", count: 63), "desk-9"] {
      var label = start
      for _ in 0..<10 {
        label = try alternative(label)
        labels.append(label)
      }
    }
    #expect(labels.contains("intake-2") && labels.contains("intake-11"))
    for label in labels {
      // What the server publishes is a name it accepts, and config.json gives its host name.
      let name = try LocalName(label)
      #expect(name.label == label)
      for host in [name.hostName, name.hostName + "."] {
        for value in [host, host + ":8080", host.uppercased() + ":80"] {
          #expect(HostPolicy.isAllowed(host: value), "\(value)")
        }
        #expect(HostPolicy.originMatches("http://\(host):8080", host: "\(host):8080"), "\(host)")
      }
      for near in [
        name.hostName + ".evil.example", name.label + ".localhost.example",
        name.hostName + "..", name.label + ".lokal.example",
      ] {
        #expect(!HostPolicy.isAllowed(host: near), "\(near)")
      }
    }
  }

  /// Returns once something sleeps on `clock` until `deadline`; fails after 5 s of real time.
  private static func waitForSleeper(on clock: ManualClock, until deadline: Duration) async throws {
    for _ in 0..<500 where !clock.deadlines.contains(deadline) {
      try await Task.sleep(for: .milliseconds(10))
    }
    try #require(clock.deadlines.contains(deadline), "nothing sleeps until \(deadline)")
  }

  private static func text(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }
}

import BrowserDropTestSupport
import CBrowserDropLinux
import Foundation
import Glibc
import Testing

@testable import BrowserDrop

/// Which of the machine's addresses are offered, and how they are labelled: the rules on their
/// own, then `getifaddrs` for real in a network namespace the test makes (nothing outside it
/// changes and no packet leaves it).
@Suite("Addresses: what is left out, what is offered, and its kind")
struct AddressTests {
  static let upAndRunning = cbd_iff_up() | cbd_iff_running()

  static let hiddenNames = [
    "tun0", "wg0", "ppp0", "tailscale0", "docker0", "br-3f2a9c", "veth12ab", "virbr0",
  ]

  @Test(arguments: hiddenNames)
  func tunnelsVPNsAndBridgesAreLeftOut(name: String) {
    #expect(
      InterfaceAddresses.isHidden(interface: name, host: "10.8.0.2", flags: Self.upAndRunning))
  }

  @Test func loopbackLinkLocalPointToPointAndDownAreLeftOut() {
    let up = Self.upAndRunning
    #expect(
      InterfaceAddresses.isHidden(
        interface: "lo", host: "127.0.0.1", flags: up | cbd_iff_loopback()))
    #expect(InterfaceAddresses.isHidden(interface: "eth0", host: "169.254.7.1", flags: up))
    #expect(
      InterfaceAddresses.isHidden(interface: "eth0", host: "fe80::1c2d:3eff:fe4f:5a6b", flags: up))
    #expect(InterfaceAddresses.isHidden(interface: "eth0", host: "FE80::1", flags: up))
    #expect(
      InterfaceAddresses.isHidden(
        interface: "modem0", host: "10.64.1.1", flags: up | cbd_iff_pointopoint()))
    #expect(
      InterfaceAddresses.isHidden(interface: "eth0", host: "192.168.1.20", flags: cbd_iff_up()))
    #expect(InterfaceAddresses.isHidden(interface: "eth0", host: "192.168.1.20", flags: 0))
    // What is left: a LAN address on an interface that is up.
    #expect(!InterfaceAddresses.isHidden(interface: "eth0", host: "192.168.1.20", flags: up))
    #expect(!InterfaceAddresses.isHidden(interface: "wlan0", host: "2001:db8::20", flags: up))
    // Names are matched from the start only: `xtun0` or `mybr-0` are not tunnels or bridges.
    for name in ["enp3s0", "xtun0", "mybr-0", "eth-wg0"] {
      #expect(!InterfaceAddresses.isHidden(interface: name, host: "10.0.0.5", flags: up), "\(name)")
    }
  }

  static func entry(
    _ interface: String, _ host: String, _ kind: Address.Kind, hidden: Bool = false
  ) -> InterfaceAddresses.Entry {
    InterfaceAddresses.Entry(host: host, interface: interface, kind: kind, hidden: hidden)
  }

  @Test func wiredComesFirstThenWiFiThenHotspotThenOther() {
    let entries = [
      Self.entry("lo", "127.0.0.1", .other, hidden: true),
      Self.entry("usb0", "10.1.1.2", .other),
      Self.entry("ap0", "10.42.0.1", .hotspot),
      Self.entry("wlan0", "192.168.1.30", .wifi),
      Self.entry("wlan0", "2001:db8::30", .wifi),
      Self.entry("eth0", "192.168.1.20", .wired),
      Self.entry("docker0", "172.17.0.1", .other, hidden: true),
      Self.entry("eth1", "2001:db8::99", .wired),
    ]
    let urls = InterfaceAddresses.select(entries, port: 80, bindAddress: nil).map {
      "\($0.kind) \($0.interface) \($0.url.absoluteString)"
    }
    // IPv6 only for an interface with no IPv4 address; port 80 is left out of the URL.
    #expect(
      urls == [
        "wired eth0 http://192.168.1.20/", "wired eth1 http://[2001:db8::99]/",
        "wifi wlan0 http://192.168.1.30/", "hotspot ap0 http://10.42.0.1/",
        "other usb0 http://10.1.1.2/",
      ])
  }

  @Test func whenNothingIsLeftTheLoopbackAddressIsOffered() {
    let hiddenOnly = [
      Self.entry("lo", "127.0.0.1", .other, hidden: true),
      Self.entry("wg0", "10.66.0.2", .other, hidden: true),
    ]
    let all = InterfaceAddresses.select(hiddenOnly, port: 8080, bindAddress: nil)
    #expect(all.map(\.url.absoluteString) == ["http://127.0.0.1:8080/"])
    #expect(all.first?.kind == .other)
    let v6 = InterfaceAddresses.select([], port: 8080, bindAddress: "::")
    #expect(v6.map(\.url.absoluteString) == ["http://[::1]:8080/"])
    // Bound to one address: that one only, with its interface's kind when known.
    let one = InterfaceAddresses.select(
      [Self.entry("wlan0", "192.168.1.30", .wifi), Self.entry("eth0", "192.168.1.20", .wired)],
      port: 8080, bindAddress: "192.168.1.30")
    #expect(one.map { "\($0.kind) \($0.url.absoluteString)" } == ["wifi http://192.168.1.30:8080/"])
  }

  /// The kind comes from sysfs: a wireless interface is Wi‑Fi, or a hotspot when it holds the
  /// address NetworkManager gives a shared connection; a physical device is wired; the rest is
  /// other. A sysfs tree of our own stands in for /sys/class/net.
  @Test func kindsFollowWhatSysfsSaysOfTheInterface() throws {
    let sysfs = FileManager.default.temporaryDirectory.appending(path: "bd-sysfs-\(UUID())")
    defer { try? FileManager.default.removeItem(at: sysfs) }
    for path in ["wlan0/wireless", "wlp2s0/phy80211", "eth0/device", "enp3s0/device", "usb0"] {
      try FileManager.default.createDirectory(
        at: sysfs.appending(path: path), withIntermediateDirectories: true)
    }
    func kind(_ interface: String, _ host: String) -> Address.Kind {
      InterfaceAddresses.classify(interface: interface, host: host, sysfs: sysfs.path)
    }
    #expect(kind("wlan0", "192.168.1.30") == .wifi)
    #expect(kind("wlp2s0", "192.168.1.31") == .wifi)
    #expect(kind("wlan0", "10.42.0.1") == .hotspot)
    #expect(kind("wlp2s0", "10.42.0.1") == .hotspot)
    #expect(kind("wlan0", "10.42.0.7") == .wifi)  // a client of someone else's hotspot
    #expect(kind("eth0", "192.168.1.20") == .wired)
    #expect(kind("enp3s0", "10.0.0.5") == .wired)
    #expect(kind("usb0", "10.1.1.2") == .other)
    #expect(kind("missing0", "10.1.1.3") == .other)
  }

  /// `getifaddrs` for real: a host program runs in a fresh network namespace holding one LAN
  /// interface and, each with a routable address, one of every kind to leave out. Only the LAN
  /// one is offered. (This kernel has no dummy driver, so interfaces are ends of veth pairs.)
  @Test func aNamespaceWithEveryKindOffersOnlyTheLANAddress() async throws {
    guard geteuid() == 0 else {
      Issue.record("AddressTests needs root for a network namespace (scripts/test.sh does)")
      return
    }
    let staging = FileManager.default.temporaryDirectory.appending(path: "bd-netns-\(UUID())")
    defer { try? FileManager.default.removeItem(at: staging) }
    let pairs: [(String, String, String, String)] = [
      ("lan0", "10.200.0.1/24", "vethlan0", "10.201.0.1/24"),
      ("tun0", "10.1.0.1/24", "ppp0", "10.2.0.1/24"),
      ("wg0", "10.3.0.1/24", "tailscale0", "100.64.0.1/10"),
      ("docker0", "172.17.0.1/16", "br-3f2a9c", "172.18.0.1/16"),
      ("virbr0", "192.168.122.1/24", "eth5", "169.254.3.4/16"),
      ("down0", "10.9.0.1/24", "down1", "10.9.1.1/24"),
    ]
    var script = ["set -e", "ip link set lo up"]
    for (name, address, peer, peerAddress) in pairs {
      script.append("ip link add \(name) type veth peer name \(peer)")
      script.append("ip addr add \(address) dev \(name)")
      script.append("ip addr add \(peerAddress) dev \(peer)")
      if !name.hasPrefix("down") {
        script.append("ip link set \(name) up")
        script.append("ip link set \(peer) up")
      }
    }
    let host = ChildProcess.product("BrowserDropTestHost").path
    // Standard input is empty, so the host prints where it listens and ends its session.
    script.append("exec '\(host)' --staging '\(staging.path)' --bind all")
    let run = try await ChildProcess.capture(
      "/usr/bin/unshare", ["--net", "--", "/bin/sh", "-c", script.joined(separator: "\n")],
      environment: ["PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"])
    #expect(run.status == 0, "\(run.errorOutput)")
    let first = try #require(run.output.split(separator: "\n").first, "\(run.errorOutput)")
    let listening = try #require(
      try JSONSerialization.jsonObject(with: Data(first.utf8)) as? [String: Any])
    let port = try #require(listening["port"] as? Int)
    let addresses = try #require(listening["addresses"] as? [[String: String]])
    #expect(
      addresses == [
        ["url": "http://10.200.0.1:\(port)/", "kind": "other", "interface": "lan0"]
      ], "\(run.output)")
  }
}

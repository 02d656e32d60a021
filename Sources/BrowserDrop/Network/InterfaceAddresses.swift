import CBrowserDropLinux
import FoundationEssentials
import Glibc

/// The machine's LAN addresses, from `getifaddrs`, labelled by kind.
enum InterfaceAddresses {
  /// Interface name prefixes of tunnels, VPNs and container or VM bridges: never shown.
  private static let hiddenPrefixes = [
    "tun", "tap", "wg", "ppp", "tailscale", "zt", "utun", "ipsec", "gre", "sit", "ip6tnl",
    "docker", "br-", "veth", "virbr", "vnet", "cni", "flannel", "cali", "lxcbr", "lxdbr",
    "podman", "vmnet", "vboxnet", "kube",
  ]

  /// The addresses at which a server listening on `port` can be reached from the LAN.
  /// When `bindAddress` names one address, only that one; when nothing is left, loopback.
  static func current(port: Int, bindAddress: String?) -> [Address] {
    select(scan(), port: port, bindAddress: bindAddress)
  }

  /// The addresses to show, from what `scan` found: hidden ones left out, wired first, then
  /// Wi‑Fi, hotspot and other, IPv6 only for interfaces without IPv4; loopback when nothing is
  /// left.
  static func select(_ all: [Entry], port: Int, bindAddress: String?) -> [Address] {
    if let bindAddress, bindAddress != "::", bindAddress != "0.0.0.0" {
      let match = all.first { $0.host == bindAddress }
      return [
        Address(
          host: bindAddress, port: port, kind: match?.kind ?? .other,
          interface: match?.interface ?? "lo")
      ]
    }
    let bindsIPv4Only = bindAddress == "0.0.0.0"
    var usable = all.filter { !$0.hidden }
    if bindsIPv4Only { usable.removeAll { $0.host.contains(":") } }
    // IPv6 only where an interface has no IPv4 address: privacy addresses come and go.
    let withIPv4 = Set(usable.filter { !$0.host.contains(":") }.map(\.interface))
    usable.removeAll { $0.host.contains(":") && withIPv4.contains($0.interface) }
    let ordered = usable.sorted { lhs, rhs in
      (rank(lhs.kind), lhs.host.contains(":") ? 1 : 0, lhs.interface, lhs.host)
        < (rank(rhs.kind), rhs.host.contains(":") ? 1 : 0, rhs.interface, rhs.host)
    }
    if ordered.isEmpty {
      let loopback = bindAddress == "::" ? "::1" : "127.0.0.1"
      return [Address(host: loopback, port: port, kind: .other, interface: "lo")]
    }
    return ordered.map {
      Address(host: $0.host, port: port, kind: $0.kind, interface: $0.interface)
    }
  }

  /// One address of one interface, as `getifaddrs` lists it.
  struct Entry {
    var host: String
    var interface: String
    var kind: Address.Kind
    var hidden: Bool
  }

  private static func rank(_ kind: Address.Kind) -> Int {
    switch kind {
    case .wired: 0
    case .wifi: 1
    case .hotspot: 2
    case .other: 3
    }
  }

  private static func scan(sysfs: String = "/sys/class/net") -> [Entry] {
    var head: UnsafeMutablePointer<ifaddrs>?
    guard getifaddrs(&head) == 0, let first = head else { return [] }
    defer { freeifaddrs(head) }
    var entries: [Entry] = []
    var kinds: [String: Address.Kind] = [:]
    var cursor: UnsafeMutablePointer<ifaddrs>? = first
    while let item = cursor {
      cursor = item.pointee.ifa_next
      guard let socketAddress = item.pointee.ifa_addr,
        let host = SocketAddress.text(of: socketAddress)
      else { continue }
      let name = String(cString: item.pointee.ifa_name)
      let flags = Int32(bitPattern: item.pointee.ifa_flags)
      let hidden = isHidden(interface: name, host: host, flags: flags)
      let kind = kinds[name] ?? classify(interface: name, host: host, sysfs: sysfs)
      kinds[name] = kind
      entries.append(Entry(host: host, interface: name, kind: kind, hidden: hidden))
    }
    return entries
  }

  /// Whether an address is one nobody on the LAN can reach the page at: its interface is down,
  /// loopback, point-to-point, a tunnel, VPN or container/VM bridge by name, or the address is
  /// link-local. `flags` are the interface's `IFF_*` flags.
  static func isHidden(interface name: String, host: String, flags: Int32) -> Bool {
    let up = flags & cbd_iff_up() != 0 && flags & cbd_iff_running() != 0
    return !up || flags & cbd_iff_loopback() != 0 || flags & cbd_iff_pointopoint() != 0
      || hiddenPrefixes.contains { name.hasPrefix($0) } || isLinkLocal(host)
  }

  private static func isLinkLocal(_ host: String) -> Bool {
    host.hasPrefix("169.254.") || host.lowercased().hasPrefix("fe80:")
  }

  /// Wi‑Fi when the kernel says the interface is wireless; a hotspot when it also holds the
  /// address NetworkManager gives a shared (access point) connection; wired when it is a
  /// physical device; other otherwise.
  static func classify(interface: String, host: String, sysfs root: String) -> Address.Kind {
    let sysfs = root + "/" + interface
    let manager = FileManager.default
    if manager.fileExists(atPath: sysfs + "/wireless")
      || manager.fileExists(atPath: sysfs + "/phy80211")
    {
      return host.hasPrefix("10.42.") && host.hasSuffix(".1") ? .hotspot : .wifi
    }
    if manager.fileExists(atPath: sysfs + "/device") { return .wired }
    return .other
  }
}

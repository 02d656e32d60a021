public import FoundationEssentials

/// A URL at which the upload page can be reached, and what kind of network it is on.
public struct Address: Sendable, Hashable, CustomStringConvertible {
  /// The kind of network interface an address belongs to.
  public enum Kind: String, Sendable, Hashable, CaseIterable {
    /// An Ethernet (or other wired) interface.
    case wired
    /// A Wi‑Fi interface joined to a network.
    case wifi
    /// A Wi‑Fi interface serving as an access point (a hotspot other devices join).
    case hotspot
    /// Anything else, including the loopback address used when no LAN address exists.
    case other
  }

  /// The page's address, for example `http://192.168.1.20/` (the port is left out when it is 80).
  public let url: URL
  /// The IP address as written in the URL's host (IPv6 without brackets).
  public let host: String
  /// The TCP port the server listens on.
  public let port: Int
  /// The kind of network the address is on.
  public let kind: Kind
  /// The name of the network interface, for example `eth0` or `wlan0`.
  public let interface: String

  /// Creates an address; the URL is derived from `host` and `port`.
  public init(host: String, port: Int, kind: Kind, interface: String) {
    self.host = host
    self.port = port
    self.kind = kind
    self.interface = interface
    let literal = host.contains(":") ? "[\(host)]" : host
    let portPart = port == 80 ? "" : ":\(port)"
    self.url = URL(string: "http://\(literal)\(portPart)/")!
  }

  /// The URL as text.
  public var description: String { url.absoluteString }
}

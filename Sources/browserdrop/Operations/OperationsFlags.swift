import BrowserDrop
import CBrowserDropLinux
import Glibc

/// Where `--metrics` serves: an IP literal and a port.
struct MetricsEndpoint: Sendable, Equatable {
  let host: String
  let port: Int

  /// As the operator would write it back: `127.0.0.1:9464`, `[::1]:9464`.
  var shown: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// The values of the operations flags, `--metrics` and `--name`, checked the way the other
/// flags are: a mistake names the flag and the value.
enum OperationsFlags {
  /// `PORT` (on 127.0.0.1), `ADDRESS:PORT` or `[IPv6]:PORT`. Only loopback unless the
  /// operator writes another address: metrics tell who uploaded how much and when.
  static func metrics(_ flag: String, _ value: String) throws(UsageError) -> MetricsEndpoint {
    let expected =
      "a port, or ADDRESS:PORT with an IP address, e.g. 9464, 127.0.0.1:9464 or [::1]:9464"
    var host = "127.0.0.1"
    var portText = Substring(value)
    if value.hasPrefix("[") {
      guard let close = value.firstIndex(of: "]"),
        value[value.index(after: close)...].hasPrefix(":")
      else { throw .badValue(flag, value, expected) }
      host = String(value[value.index(after: value.startIndex)..<close])
      portText = value[value.index(close, offsetBy: 2)...]
      var address = in6_addr()
      guard inet_pton(AF_INET6, host, &address) == 1 else { throw .badValue(flag, value, expected) }
    } else if let colon = value.lastIndex(of: ":") {
      host = String(value[..<colon])
      portText = value[value.index(after: colon)...]
      var address = in_addr()
      guard inet_pton(AF_INET, host, &address) == 1 else { throw .badValue(flag, value, expected) }
    }
    guard let port = Int(portText), (0...65535).contains(port) else {
      throw .badValue(flag, value, expected)
    }
    return MetricsEndpoint(host: host, port: port)
  }

  /// A single DNS label (letters, digits, hyphens; 1–63 bytes; no hyphen at either end),
  /// advertised as `NAME.local`; a trailing `.local` is accepted and dropped. The library's
  /// rule (`LocalName`), worded for the flag.
  static func name(_ flag: String, _ value: String) throws(UsageError) -> String {
    do {
      return try LocalName(value).label
    } catch {
      throw .badValue(
        flag, value,
        "one name of letters, digits and hyphens (up to 63), e.g. intake, advertised as intake.local"
      )
    }
  }
}

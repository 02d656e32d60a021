import Glibc
import Synchronization

/// The DNS-rebinding and cross-site checks: which Host and Origin values are the server's own.
enum HostPolicy {
  private static let privateSuffixes = [".local", ".lan", ".home", ".home.arpa", ".internal"]

  /// The last Host value found allowed, and the last Origin and Host found to match: nearly
  /// every request repeats them, the checks are pure functions of the text, and comparing two
  /// short strings costs far less than parsing one.
  private static let lastAllowedHost = Mutex<String?>(nil)
  private static let lastMatchingOrigin = Mutex<(origin: String, host: String)?>(nil)

  /// Whether `host` (a Host header value, port included) names this machine on a private
  /// network: an IP literal, `localhost`, a single-label name or a private-use suffix.
  static func isAllowed(host value: String) -> Bool {
    if lastAllowedHost.withLock({ $0 == value }) { return true }
    guard checkHost(value) else { return false }
    lastAllowedHost.withLock { $0 = value }
    return true
  }

  private static func checkHost(_ value: String) -> Bool {
    // Only the bytes a name, an IP literal and a port are made of. Anything else, a NUL above
    // all, is refused before it reaches `inet_pton`, which would stop reading at a NUL.
    guard value.utf8.allSatisfy(isHostByte), let (name, _) = split(value) else { return false }
    if name.hasPrefix("[") {
      let inner = String(name.dropFirst().dropLast())
      var address = in6_addr()
      return inet_pton(AF_INET6, inner, &address) == 1
    }
    var v4 = in_addr()
    if inet_pton(AF_INET, name, &v4) == 1 { return true }
    let lower = name.lowercased()
    let trimmed = lower.hasSuffix(".") ? String(lower.dropLast()) : lower
    guard isHostname(trimmed) else { return false }
    if trimmed == "localhost" || !trimmed.contains(".") { return true }
    return privateSuffixes.contains { trimmed.hasSuffix($0) }
  }

  private static func isHostByte(_ byte: UInt8) -> Bool {
    switch byte {
    case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
    case UInt8(ascii: "."), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: ":"),
      UInt8(ascii: "["), UInt8(ascii: "]"):
      true
    default: false
    }
  }

  /// Whether `origin` is `http://` + the request's Host (the same host and port).
  static func originMatches(_ origin: String, host: String) -> Bool {
    if lastMatchingOrigin.withLock({ $0?.origin == origin && $0?.host == host }) { return true }
    guard checkOrigin(origin, host: host) else { return false }
    lastMatchingOrigin.withLock { $0 = (origin, host) }
    return true
  }

  private static func checkOrigin(_ origin: String, host: String) -> Bool {
    let prefix = "http://"
    guard origin.count > prefix.count, origin.lowercased().hasPrefix(prefix),
      let (originName, originPort) = split(String(origin.dropFirst(prefix.count))),
      let (hostName, hostPort) = split(host)
    else { return false }
    return originName.lowercased() == hostName.lowercased()
      && (originPort ?? 80) == (hostPort ?? 80)
  }

  /// Splits `name[:port]` or `[v6][:port]`; `nil` when malformed.
  private static func split(_ value: String) -> (String, Int?)? {
    guard !value.isEmpty else { return nil }
    var name = Substring(value)
    var port: Int?
    if value.hasPrefix("[") {
      guard let close = value.firstIndex(of: "]") else { return nil }
      name = value[...close]
      let rest = value[value.index(after: close)...]
      if !rest.isEmpty {
        guard rest.first == ":", let number = parsePort(rest.dropFirst()) else { return nil }
        port = number
      }
    } else if let colon = value.firstIndex(of: ":") {
      name = value[..<colon]
      guard let number = parsePort(value[value.index(after: colon)...]) else { return nil }
      port = number
    }
    guard !name.isEmpty else { return nil }
    return (String(name), port)
  }

  private static func parsePort(_ text: Substring) -> Int? {
    guard !text.isEmpty, text.count <= 5, text.allSatisfy(\.isASCIIDigit),
      let number = Int(text), number <= 65535
    else { return nil }
    return number
  }

  private static func isHostname(_ name: String) -> Bool {
    guard !name.isEmpty, name.utf8.count <= 253 else { return false }
    return name.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
      !label.isEmpty && label.utf8.count <= 63 && label.first != "-" && label.last != "-"
        && label.utf8.allSatisfy { byte in
          (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39) || byte == 0x2D
            || byte == 0x5F
        }
    }
  }
}

extension Character {
  fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}

extension Refusal {
  /// The answer to a Host that names no private address (DNS rebinding).
  static let foreignHost = Refusal(
    .forbidden, "The Host header does not name this device on a private network.")
}

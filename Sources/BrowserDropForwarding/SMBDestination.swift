public import FoundationEssentials

/// A folder on an SMB share: `smb://[user@]host[:port]/share[/path]`.
///
/// The address may name a user; the password always travels separately in ``Credentials``.
public struct SMBDestination: Destination {
  /// The server's host name or IP address.
  public let host: String
  /// The TCP port; 445 when the address names none.
  public let port: Int
  /// The share's name.
  public let share: String
  /// Folders under the share's root, already percent-decoded; empty for the root.
  public let path: [String]
  /// Who to sign in as; ``Credentials/guest`` for anonymous access.
  public let credentials: Credentials
  /// Protocol, encryption and timeout settings.
  public let options: SMBOptions

  /// Parses `url`. Credentials default to the address's user with an empty password, or guest.
  ///
  /// - Throws: ``ForwardFailure`` of kind ``ForwardFailure/Kind/invalidDestination`` when `url`
  ///   is not an `smb://host/share` address.
  public init(
    url: URL, credentials: Credentials? = nil, options: SMBOptions = SMBOptions()
  )
    throws(ForwardFailure)
  {
    let text = url.absoluteString
    guard let components = URLComponents(url: url, resolvingAgainstBaseURL: false),
      components.scheme?.lowercased() == "smb", let host = components.host, !host.isEmpty,
      components.password == nil
    else { throw ForwardFailure(kind: .invalidDestination, place: .address(text)) }
    let segments = components.percentEncodedPath.split(separator: "/").map {
      SMBURL.decode(String($0)) ?? String($0)
    }
    guard let share = segments.first, !share.isEmpty,
      !segments.contains(where: { $0 == "." || $0 == ".." })
    else { throw ForwardFailure(kind: .invalidDestination, place: .address(text)) }
    self.host = host
    self.port = components.port ?? 445
    self.share = share
    self.path = Array(segments.dropFirst())
    self.credentials =
      credentials ?? components.user.map { Credentials(username: $0, password: "") } ?? .guest
    self.options = options
  }

  /// Parses an `smb://` address given as text.
  ///
  /// - Throws: ``ForwardFailure`` of kind ``ForwardFailure/Kind/invalidDestination``.
  public init(
    _ address: String, credentials: Credentials? = nil, options: SMBOptions = SMBOptions()
  )
    throws(ForwardFailure)
  {
    guard let url = URL(string: address) else {
      throw ForwardFailure(kind: .invalidDestination, place: .address(address))
    }
    try self.init(url: url, credentials: credentials, options: options)
  }

  /// `smb://user@host:port/share/path`, percent-encoded, never with a password.
  public var description: String {
    let user = credentials.isGuest ? "" : SMBURL.encode(credentials.username) + "@"
    let portText = port == 445 ? "" : ":\(port)"
    let rest = ([share] + path).map(SMBURL.encode).joined(separator: "/")
    return "smb://\(user)\(host)\(portText)/\(rest)"
  }
}

extension SMBDestination: DestinationBackend {
  func open() async throws -> any DestinationFileSystem {
    try await SMBFileSystem.connect(to: self)
  }

  var manifestIdentity: String { description }
}

/// Builds libsmbclient URLs.
package enum SMBURL {
  /// Everything but RFC 3986 unreserved characters is percent-encoded, so `?`, `#`, `%` and `/`
  /// inside a name reach the server as that name (libsmbclient percent-decodes every path).
  package static func encode(_ component: String) -> String {
    var result = ""
    for byte in component.utf8 {
      switch byte {
      case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
        UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
        UInt8(ascii: "_"), UInt8(ascii: "~"):
        result.unicodeScalars.append(Unicode.Scalar(byte))
      default:
        let hex = Array("0123456789ABCDEF".unicodeScalars)
        result.unicodeScalars.append("%")
        result.unicodeScalars.append(hex[Int(byte >> 4)])
        result.unicodeScalars.append(hex[Int(byte & 0x0F)])
      }
    }
    return result
  }

  /// Percent-decodes `text` as Foundation's `removingPercentEncoding`: `nil` when a `%` is not
  /// followed by two hexadecimal digits or the bytes are not UTF-8.
  static func decode(_ text: String) -> String? {
    var bytes: [UInt8] = []
    var rest = text.utf8[...]
    while let byte = rest.popFirst() {
      guard byte == UInt8(ascii: "%") else {
        bytes.append(byte)
        continue
      }
      guard let high = rest.popFirst().flatMap(hexValue),
        let low = rest.popFirst().flatMap(hexValue)
      else { return nil }
      bytes.append(high << 4 | low)
    }
    return String(validating: bytes, as: UTF8.self)
  }

  private static func hexValue(_ digit: UInt8) -> UInt8? {
    switch digit {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
    default: nil
    }
  }
}

/// Connection settings for an SMB destination.
public struct SMBOptions: Sendable, Equatable {
  /// An SMB dialect, as libsmbclient names them.
  public enum ProtocolVersion: String, Sendable, Equatable, CaseIterable {
    /// SMB 2.0.2.
    case smb2 = "SMB2_02"
    /// SMB 2.1.
    case smb21 = "SMB2_10"
    /// SMB 3.0.
    case smb3 = "SMB3_00"
    /// SMB 3.0.2.
    case smb302 = "SMB3_02"
    /// SMB 3.1.1.
    case smb311 = "SMB3_11"
  }

  /// Whether traffic must be encrypted.
  public enum Encryption: Sendable, Equatable {
    /// Never ask for encryption.
    case off
    /// Ask for encryption; carry on without it when the server declines.
    case requested
    /// Refuse to send anything unless the server encrypts the session.
    case required
  }

  /// The oldest dialect to accept. SMB1 is never offered.
  public var minimumProtocol: ProtocolVersion
  /// The newest dialect to offer.
  public var maximumProtocol: ProtocolVersion
  /// Whether to ask for, or insist on, encryption.
  public var encryption: Encryption
  /// How long to wait for the server to answer a request. Connecting has a further fixed 5 s limit
  /// inside libsmbclient when the server never answers the TCP handshake.
  public var timeout: Duration

  /// Settings with SMB2–SMB3, no encryption requirement and a 20 s timeout by default.
  public init(
    minimumProtocol: ProtocolVersion = .smb2, maximumProtocol: ProtocolVersion = .smb311,
    encryption: Encryption = .off, timeout: Duration = .seconds(20)
  ) {
    self.minimumProtocol = minimumProtocol
    self.maximumProtocol = maximumProtocol
    self.encryption = encryption
    self.timeout = timeout
  }

  var timeoutMilliseconds: Int32 {
    let (seconds, attoseconds) = timeout.components
    return Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000)
  }
}

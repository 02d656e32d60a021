import Glibc

/// A user name and password for an SMB share, kept apart from the destination's address.
///
/// The password is copied into memory this value owns and overwritten with zeros when the last
/// copy goes away. It never appears in `description`, `debugDescription` or a mirror, so logging
/// a destination or its credentials cannot leak it. The `String` you pass in is yours: Swift gives
/// no way to wipe it, so read it from the environment or a file right before use and drop it.
public struct Credentials: Sendable, CustomStringConvertible, CustomDebugStringConvertible,
  CustomReflectable
{
  /// The user name; empty for guest access.
  public let username: String
  /// The workgroup or domain; empty for the server's default.
  public let workgroup: String
  let password: Secret

  /// Credentials for a named user.
  public init(username: String, password: String, workgroup: String = "") {
    self.username = username
    self.workgroup = workgroup
    self.password = Secret(password)
  }

  /// Anonymous (guest) access.
  public static var guest: Credentials { Credentials(username: "", password: "") }

  /// Whether these are the anonymous guest credentials.
  public var isGuest: Bool { username.isEmpty }

  /// `user “name”` or `guest`; never the password.
  public var description: String { isGuest ? "guest" : "user “\(username)”" }

  /// Same as `description`.
  public var debugDescription: String { description }

  /// A mirror without the password.
  public var customMirror: Mirror { Mirror(self, children: ["username": username]) }
}

/// Bytes wiped on deinit. `@unchecked Sendable`: immutable after init; deinit runs once.
final class Secret: @unchecked Sendable {
  private let bytes: UnsafeMutableBufferPointer<CChar>

  init(_ string: String) {
    let utf8 = Array(string.utf8CString)
    bytes = .allocate(capacity: utf8.count)
    _ = bytes.initialize(from: utf8)
  }

  /// Copies the NUL-terminated secret into a C buffer of `capacity` bytes (truncating).
  func copy(into buffer: UnsafeMutablePointer<CChar>, capacity: Int) {
    guard capacity > 0 else { return }
    let count = min(bytes.count - 1, capacity - 1)
    buffer.update(from: bytes.baseAddress!, count: count)
    buffer[count] = 0
  }

  deinit {
    // explicit_bzero cannot be optimised away as a dead store.
    explicit_bzero(bytes.baseAddress!, bytes.count)
    bytes.deallocate()
  }
}

import Glibc

/// Why a delivery stopped, as a sentence a person can act on.
///
/// This is the one place where `errno` values and their context become messages. Every message
/// names the server (or the local folder) and suggests a next step, e.g.
/// `Couldn't reach 192.168.1.50 — the connection timed out. Check that the server is on and
/// reachable from this network.`
public struct ForwardFailure: Error, Sendable, Equatable, CustomStringConvertible {
  /// What went wrong, independent of wording.
  public enum Kind: Sendable, Equatable {
    /// Nothing accepted the connection.
    case connectionRefused
    /// The server did not answer in time.
    case timedOut
    /// No network route to the server.
    case unreachable
    /// The server rejected the user name or password.
    case wrongCredentials
    /// Signed in, but this user may not use the share.
    case permissionDenied
    /// The server has no share by that name.
    case shareNotFound
    /// The share or folder does not accept writes from this user.
    case readOnly
    /// No space left at the destination.
    case destinationFull
    /// The connection dropped while a file was being sent.
    case connectionLost
    /// The destination refused a name.
    case nameNotAllowed
    /// The name is taken and the policy is ``CollisionPolicy/fail``.
    case nameTaken
    /// A delivered file's size or checksum differs from the source.
    case verificationFailed
    /// A file in the folder being forwarded could not be read.
    case sourceUnreadable
    /// The destination address is not usable.
    case invalidDestination
    /// libsmbclient, which SMB forwarding loads when first used, is missing or unusable.
    case smbUnavailable
    /// Another delivery of the same folder is running (in this process or another); nothing
    /// was sent. Trying again once it has ended finishes the job.
    case folderBusy
    /// The server still holds a request of a connection that was given up (a stalled server):
    /// a handle on this delivery's uploaded file is open there, so a rename sent before may
    /// still move it. Nothing was sent again; trying again once the server has let go of it
    /// finishes the job.
    case earlierRequestPending
    /// Anything else, with the system's own words.
    case other
  }

  /// Where the failure happened, for wording.
  enum Place: Sendable, Equatable {
    case smb(host: String, share: String, user: String?)
    case local(directory: String)
    case address(String)
    case source
  }

  /// What went wrong.
  public let kind: Kind
  /// The server's host name or address, or the local folder's path.
  public let host: String
  /// The item (relative path) involved, when there is one.
  public let item: String?
  /// The underlying `errno`, when there is one.
  public let errno: Int32?
  let place: Place
  /// The system's own words when there is no `errno`: the dynamic loader's, for `smbUnavailable`.
  let detail: String?

  init(
    kind: Kind, place: Place, item: String? = nil, errno: Int32? = nil, detail: String? = nil
  ) {
    self.kind = kind
    self.place = place
    self.item = item
    self.errno = errno
    self.detail = detail
    switch place {
    case .smb(let host, _, _): self.host = host
    case .local(let directory): self.host = directory
    case .address(let text): self.host = text
    case .source: self.host = "this computer"
    }
  }

  /// What an operation was doing when it failed; decides how an ambiguous `errno` reads.
  enum Operation: Sendable {
    /// Signing in and opening the share (the first request of a delivery).
    case connect
    /// Creating folders or files, renaming, removing.
    case modify
    /// Sending file contents.
    case transfer
    /// Reading back or checking what arrived.
    case inspect
  }

  /// Turns `errno` from `operation` at `place` into a failure. `log` is what libsmbclient logged
  /// during the call; it is the only way to tell a rejected password from a denied share, as both
  /// are `EACCES`.
  static func from(
    errno code: Int32, during operation: Operation, at place: Place, item: String? = nil,
    log: [String] = []
  ) -> ForwardFailure {
    let isSMB = if case .smb = place { true } else { false }
    let kind: Kind
    switch code {
    case ECONNREFUSED:
      // After a mid-transfer drop the next call on the same context is refused.
      kind = operation == .transfer ? .connectionLost : .connectionRefused
    case ETIMEDOUT:
      kind = operation == .transfer ? .connectionLost : .timedOut
    case EHOSTUNREACH, ENETUNREACH, EHOSTDOWN, ENETDOWN:
      kind = .unreachable
    case ECONNABORTED, ECONNRESET, ENETRESET, EPIPE, ENOTCONN:
      // ENETRESET: what libsmbclient reports when smbd goes away under a write.
      kind = .connectionLost
    case EACCES, EPERM, EROFS:
      if operation == .connect && isSMB {
        let rejected = log.contains {
          $0.contains("LOGON_FAILURE") || $0.contains("SPNEGO login failed")
            || $0.contains("WRONG_PASSWORD")
        }
        kind = rejected ? .wrongCredentials : .permissionDenied
      } else {
        kind = .readOnly
      }
    case ENOENT where operation == .connect && isSMB:
      kind = .shareNotFound
    case ENOSPC, EDQUOT, EFBIG:
      kind = .destinationFull
    case EINVAL where item != nil && operation == .modify, ENAMETOOLONG, EILSEQ:
      kind = .nameNotAllowed
    default:
      kind = .other
    }
    return ForwardFailure(kind: kind, place: place, item: item, errno: code)
  }

  /// The sentence to show: what went wrong, then what to do about it.
  public var description: String { "\(problem) \(advice)" }

  /// What went wrong, as one sentence naming the host or folder (and the file, when one).
  public var problem: String { parts.problem }

  /// What to do about it, as one sentence written for an app's user ("forward again", "Keep
  /// Both"); a host with other controls can show `problem` with its own advice instead.
  public var advice: String { parts.advice }

  private var parts: (problem: String, advice: String) {
    let item = self.item.map { "“\($0)”" } ?? "a file"
    switch kind {
    case .connectionRefused:
      return (
        "Couldn't reach \(host) — the connection was refused.",
        "Check the address and port, and that file sharing is turned on."
      )
    case .timedOut:
      return (
        "Couldn't reach \(host) — the connection timed out.",
        "Check that the server is on and reachable from this network."
      )
    case .unreachable:
      return (
        "Couldn't reach \(host) — there is no network route to it.",
        "Check this computer's network connection."
      )
    case .wrongCredentials:
      return ("\(host) rejected the user name or password.", "Check them and try again.")
    case .permissionDenied:
      if case .smb(_, let share, let user) = place {
        let who = user.map { "“\($0)”" } ?? "guests"
        return (
          "\(host) didn't let \(who) into the share “\(share)”.",
          "Sign in as a user who has access to it."
        )
      }
      return ("\(capitalized(placeName)) can't be opened by this user.", "Check its permissions.")
    case .shareNotFound:
      if case .smb(_, let share, _) = place {
        return ("\(host) has no share named “\(share)”.", "Check the share name in the address.")
      }
      return ("\(capitalized(placeName)) doesn't exist.", "Check the address.")
    case .readOnly:
      return (
        "\(capitalized(placeName)) is read-only for this user.",
        "Choose another destination or ask for write access."
      )
    case .destinationFull:
      return (
        "\(capitalized(placeName)) is full — \(item) didn't fit.",
        "Free up space there, then forward again."
      )
    case .connectionLost:
      return (
        "Lost the connection to \(host) while sending \(item).",
        "Forward again to finish; files that arrived won't be sent twice."
      )
    case .nameNotAllowed:
      return (
        "\(capitalized(placeName)) doesn't allow the name \(item).",
        "Rename it, then forward again."
      )
    case .nameTaken:
      return (
        "\(item) already exists in \(placeName).",
        "Choose Keep Both or Replace, or move the existing item."
      )
    case .verificationFailed:
      return (
        "\(item) arrived in \(placeName) different from the original.",
        "Forward again to resend it."
      )
    case .sourceUnreadable:
      return (
        "Couldn't read \(item) from the folder being forwarded (\(reason)).",
        "Check that the folder is still there."
      )
    case .invalidDestination:
      return (
        "“\(host)” isn't an SMB address.",
        "Use smb://server/share or smb://server/share/folder."
      )
    case .smbUnavailable:
      let why = detail ?? "no reason given"
      return (
        "Couldn't forward to \(host) — SMB forwarding needs the libsmbclient library "
          + "(Debian package libsmbclient), which could not be loaded (\(why)).",
        "Install libsmbclient, then forward again."
      )
    case .folderBusy:
      return (
        "Another delivery of this folder is running.",
        "Wait for it to finish, then forward again."
      )
    case .earlierRequestPending:
      return (
        "\(host) still has \(item) open for a request sent before the connection was lost, "
          + "and may still move it.",
        "Forward again in a minute; nothing is sent twice."
      )
    case .other:
      return ("Couldn't forward to \(host) — \(reason).", "Try again, or check the destination.")
    }
  }

  private var placeName: String {
    switch place {
    case .smb(let host, let share, _): "the share “\(share)” on \(host)"
    case .local(let directory): "the folder \(directory)"
    case .address(let text): text
    case .source: "the folder being forwarded"
    }
  }

  private var reason: String {
    guard let errno else { return "an unexpected error" }
    return String(cString: strerror(errno)).lowercased()
  }

  private func capitalized(_ text: String) -> String {
    text.prefix(1).uppercased() + text.dropFirst()
  }
}

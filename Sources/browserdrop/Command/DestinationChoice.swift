import BrowserDropForwarding
import FoundationEssentials

/// Where `--to` sends what arrived: a local folder or an SMB share.
enum DestinationChoice: Sendable {
  /// A folder on this computer.
  case local(URL)
  /// `smb://[user@]host[:port]/share[/path]`, checked, with the password read from a safe place.
  case smb(address: String, credentials: Credentials?)

  /// Checks the value of `--to` and finds what it names, in the validation step: a local folder
  /// must be one or be able to become one, and the SMB password is read from `passwordFile`,
  /// then `BROWSERDROP_SMB_PASSWORD`, then `$CREDENTIALS_DIRECTORY/smb-password`.
  static func resolve(
    _ text: String, passwordFile: String?, environment: [String: String]
  ) throws(UsageError) -> DestinationChoice {
    guard !text.isEmpty else { throw .badValue("--to", text, "a folder or an smb:// address") }
    let lowered = text.lowercased()
    // Error messages show the address with any password in it masked.
    let shown = hidingPassword(text)
    if lowered.hasPrefix("smb:"), !lowered.hasPrefix("smb://") {
      throw .badValue(
        "--to", shown, "an SMB address starts with smb:// as in smb://[user@]host[:port]/share")
    }
    if lowered.hasPrefix("smb://") {
      if shown != text {
        throw .badValue(
          "--to", shown,
          "a password never goes in the address; give it in BROWSERDROP_SMB_PASSWORD, "
            + "a file named by --smb-password-file, or the systemd credential smb-password")
      }
      let probe: SMBDestination
      do { probe = try SMBDestination(text) } catch {
        throw .badValue(
          "--to", shown, "an SMB address looks like smb://[user@]host[:port]/share[/path]")
      }
      guard (1...65535).contains(probe.port) else {
        throw .badValue("--to", shown, "the port must be a number from 1 to 65535")
      }
      if !probe.credentials.isGuest {
        guard let password = try readPassword(file: passwordFile, environment: environment) else {
          throw UsageError(
            "--to names the user \(TerminalText.quoted(probe.credentials.username)) but no SMB "
              + "password was given: set BROWSERDROP_SMB_PASSWORD, pass --smb-password-file FILE, "
              + "or provide the systemd credential smb-password "
              + "($CREDENTIALS_DIRECTORY/smb-password).")
        }
        return .smb(
          address: text,
          credentials: Credentials(username: probe.credentials.username, password: password))
      }
      return .smb(address: text, credentials: nil)
    }
    if lowered.hasPrefix("file://") {
      guard let url = URL(string: text), url.isFileURL else {
        throw .badValue("--to", shown, "a folder path or an smb:// address")
      }
      return .local(try checkedFolder(url.standardizedFileURL, shown: shown))
    }
    if let scheme = lowered.split(separator: ":", maxSplits: 1).first, lowered.contains("://"),
      scheme.allSatisfy({ $0.isLetter })
    {
      throw .badValue("--to", shown, "only local folders and smb:// addresses are supported")
    }
    let expanded = PathText.expandingTilde(text)
    let url = URL(filePath: expanded, directoryHint: .isDirectory).standardizedFileURL
    return .local(try checkedFolder(url, shown: shown))
  }

  /// `url` when it is a folder or can become one: the nearest part of the path that exists must
  /// be a folder, so a file given by mistake shows at start rather than at every forward.
  private static func checkedFolder(_ url: URL, shown: String) throws(UsageError) -> URL {
    var probe = url
    while true {
      var isDirectory = false
      if FileManager.default.fileExists(atPath: probe.path, isDirectory: &isDirectory) {
        guard isDirectory else {
          let what = probe.path == url.path ? "it is a file" : "\(probe.path) is a file"
          throw .badValue("--to", shown, "\(what), not a folder")
        }
        return url
      }
      let parent = probe.deletingLastPathComponent()
      if parent.path == probe.path { return url }
      probe = parent
    }
  }

  /// The destination for one delivery; `subfolder` is the batch's own folder, when there is one.
  func destination(subfolder: String?) throws -> any Destination {
    switch self {
    case .local(let url):
      let directory = subfolder.map { url.appending(path: $0, directoryHint: .isDirectory) } ?? url
      return LocalDestination(directory: directory)
    case .smb(let address, let credentials):
      var full = address
      if let subfolder {
        if !full.hasSuffix("/") { full += "/" }
        full += SMBURL.encode(subfolder)
      }
      return try SMBDestination(full, credentials: credentials)
    }
  }

  /// What to show for the destination: the folder's path or the address without a password.
  var displayName: String {
    switch self {
    case .local(let url): url.path
    case .smb(let address, let credentials):
      (try? SMBDestination(address, credentials: credentials).description) ?? address
    }
  }

  private static func readPassword(
    file: String?, environment: [String: String]
  )
    throws(UsageError) -> String?
  {
    if let file {
      guard let data = FileManager.default.contents(atPath: file) else {
        throw .badValue("--smb-password-file", file, "the file can't be read")
      }
      guard let text = String(data: data, encoding: .utf8) else {
        throw .badValue("--smb-password-file", file, "the file must hold UTF-8 text")
      }
      let password = trimmingOneNewline(text)
      guard !password.isEmpty else {
        throw .badValue("--smb-password-file", file, "the file is empty; it must hold the password")
      }
      return password
    }
    // An empty variable counts as unset.
    if let password = environment["BROWSERDROP_SMB_PASSWORD"], !password.isEmpty {
      return password
    }
    if let directory = environment["CREDENTIALS_DIRECTORY"] {
      let path = URL(filePath: directory).appending(path: "smb-password").path
      if let data = FileManager.default.contents(atPath: path),
        let text = String(data: data, encoding: .utf8), !trimmingOneNewline(text).isEmpty
      {
        return trimmingOneNewline(text)
      }
    }
    return nil
  }

  /// `text` with the password of a `scheme://user:password@host…` address replaced by `…`;
  /// anything else unchanged.
  static func hidingPassword(_ text: String) -> String {
    guard let scheme = text.firstRange(of: "://") else { return text }
    let authorityEnd = text[scheme.upperBound...].firstIndex { "/?#".contains($0) } ?? text.endIndex
    let authority = text[scheme.upperBound..<authorityEnd]
    guard let at = authority.lastIndex(of: "@"),
      let colon = authority[..<at].firstIndex(of: ":")
    else { return text }
    var result = text
    result.replaceSubrange(text.index(after: colon)..<at, with: "…")
    return result
  }

  private static func trimmingOneNewline(_ text: String) -> String {
    var text = text
    if text.hasSuffix("\r\n") || text.hasSuffix("\n") { text.removeLast() }
    return text
  }
}

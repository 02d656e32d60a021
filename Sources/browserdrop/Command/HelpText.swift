/// The text of `browserdrop --help` and `--version`.
enum HelpText {
  /// The version printed by `--version`.
  static let version = "0.1.0"

  /// The help text, complete enough to use the command without the README: the overview, each
  /// section of flags as `CommandFlags` declares them, then what no single flag says.
  static let help = overview + flagSections(CommandFlags.all) + details

  private static let overview = """
    OVERVIEW: Receive files from any browser on the local network.

    browserdrop serves an upload page on this computer. People on the same network open the
    address (or scan the QR code) and drop files or folders; what arrives complete is forwarded
    to a local folder or an SMB share. Nothing leaves the local network.

    USAGE: browserdrop [--to DEST] [options]
           browserdrop --kiosk --to DEST [options]

    """

  private static let details = """
    ONE-SHOT MODE (the default):
      Press Enter, or send SIGINT (Ctrl-C) or SIGTERM, to finish: uploads still in flight are
      dropped, complete files are forwarded to --to and a summary is printed. End of input is
      ignored. A second Ctrl-C while forwarding stops it and keeps the staged folder.

    SMB PASSWORDS:
      Never on the command line. When the address names a user, the password is read from
      --smb-password-file FILE, else the BROWSERDROP_SMB_PASSWORD environment variable, else
      the systemd credential "smb-password" ($CREDENTIALS_DIRECTORY/smb-password, see
      LoadCredential=); an empty variable counts as unset. A user with no password from any
      of these is a usage error. Without a user in the address, guest access is used. An address
      with a password in it (smb://user:password@host/…) is refused, and the password is
      never printed.

    EXIT STATUS:
      0  finished (and forwarded, when --to was given)
      1  the server couldn't start, or forwarding failed (the staged folder is kept)
      2  a usage error
      130 / 143  stopped by a second SIGINT / SIGTERM while forwarding (the folder is kept)

    EXAMPLES:
      browserdrop --to ~/Inbox
      browserdrop --to ~/Music --allow mp3,m4a,flac --max-file-size 2G
      BROWSERDROP_SMB_PASSWORD=… browserdrop --to smb://anna@nas.local/drops
      browserdrop --kiosk --quiet-period 120 --to smb://intake@192.168.1.50/scans --json

    """

  /// The column where the flags' help starts, as in swift-argument-parser.
  static let helpColumn = 26

  /// Each section of `flags` under its title, the flags in their declared order.
  static func flagSections(_ flags: [Flag]) -> String {
    HelpSection.allCases.map { section in
      "\n\(section.rawValue):\n"
        + flags.filter { $0.section == section }.map(entry(for:)).joined()
    }.joined() + "\n"
  }

  /// One flag in `--help`: its label on the left, its help from `helpColumn` on, the label on
  /// a line of its own when it reaches the column.
  static func entry(for flag: Flag) -> String {
    let label = "  " + flag.helpLabel
    let indent = String(repeating: " ", count: helpColumn)
    var text = label
    for (index, line) in flag.help.enumerated() {
      if index == 0, label.count + 2 <= helpColumn {
        text += String(repeating: " ", count: helpColumn - label.count) + line + "\n"
      } else {
        if index == 0 { text += "\n" }
        text += indent + line + "\n"
      }
    }
    return flag.help.isEmpty ? text + "\n" : text
  }
}

import BrowserDrop
import BrowserDropForwarding

/// What the command line says, each value read and checked on its own, nothing yet checked
/// against the system or against the other flags: the result of parsing, which does no I/O.
/// `validated(environment:)` turns it into `CommandOptions`. Defaults are the documented ones.
struct ParsedArguments: Sendable {
  /// `--to`, as written: a folder or an smb:// address, resolved by the validation step.
  var destinationText: String?
  /// `--bind`.
  var bindAddress: String?
  /// `--port`.
  var port = 80
  /// `--staging`, as written (`~` not yet expanded).
  var stagingPath: String?
  /// `--allow`, lowercased and without dots.
  var allowedExtensions: Set<String>?
  /// `--max-file-size`, in bytes.
  var maximumFileSize: Int?
  /// `--reserve`, in bytes.
  var reservedFreeSpace = 1 << 30
  /// `--max-connections`.
  var maximumConnections = 64
  /// `--max-concurrent`.
  var maximumConcurrentUploads = 3
  /// `--idle-timeout`, in seconds.
  var idleTimeout = 30.0
  /// `--durability`.
  var durability = true
  /// `--content-check`.
  var contentPolicy = ContentPolicy.rejectDisguised
  /// `--title`, `--language` and `--accent`; the strings come from `stringsFiles`.
  var pageSettings = PageSettings()
  /// Every `--strings` file given, in order; the last one counts, each must read.
  var stringsFiles: [String] = []
  /// Every `--page` folder given, in order; the last one counts, each must hold index.html.
  var pageFolders: [String] = []
  /// `--on-conflict`.
  var collisionPolicy = CollisionPolicy.rename
  /// `--kiosk`.
  var kiosk = false
  /// `--quiet-period`, in seconds, when given (it only applies with `--kiosk`).
  var quietPeriod: Double?
  /// `--json`.
  var json = false
  /// `--no-qr` clears it.
  var drawsQRCode = true
  /// `--batch-folder`.
  var batchFolder: BatchFolderPattern?
  /// `--smb-password-file`, as written.
  var smbPasswordFile: String?
  /// `--name`: the mDNS name advertised as `NAME.local` (Operations/).
  var advertisedName: String?
  /// `--metrics`: where `/metrics` and `/healthz` are served (Operations/).
  var metrics: MetricsEndpoint?
}

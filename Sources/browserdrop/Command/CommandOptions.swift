import BrowserDrop
import BrowserDropForwarding
import FoundationEssentials

/// Everything the command line said, checked and ready to use.
struct CommandOptions: Sendable {
  /// How output is written.
  enum OutputStyle: Sendable, Equatable {
    /// Live progress bars and a QR code (standard output is a terminal).
    case terminal
    /// One plain line per event (standard output is a file or a pipe).
    case plain
    /// One JSON object per line (`--json`).
    case json
  }

  var destination: DestinationChoice?
  var bindAddress: String?
  var port = 80
  var stagingRoot = BrowserDropServer.Configuration.defaultStagingRoot
  var allowedExtensions: Set<String>?
  var maximumFileSize: Int?
  var reservedFreeSpace = 1 << 30
  var maximumConnections = 64
  var maximumConcurrentUploads = 3
  var idleTimeout = 30.0
  var durability = true
  var contentPolicy = ContentPolicy.rejectDisguised
  var pageSettings = PageSettings()
  var pageDirectory: URL?
  var collisionPolicy = CollisionPolicy.rename
  var kiosk = false
  var quietPeriod = 60.0
  var json = false
  var drawsQRCode = true
  var batchFolder: BatchFolderPattern?
  var smbPasswordFile: String?
  /// `--name`: the mDNS name advertised as `NAME.local` (Operations/).
  var advertisedName: String?
  /// `--metrics`: where `/metrics` and `/healthz` are served (Operations/).
  var metrics: MetricsEndpoint?

  /// The server configuration for one session on `port`.
  func serverConfiguration(port: Int) -> BrowserDropServer.Configuration {
    BrowserDropServer.Configuration(
      allowedExtensions: allowedExtensions,
      maximumFileSize: maximumFileSize,
      reservedFreeSpace: reservedFreeSpace,
      idleTimeout: .milliseconds(Int((idleTimeout * 1000).rounded())),
      maximumConnections: maximumConnections,
      maximumConcurrentUploads: maximumConcurrentUploads,
      stagingRoot: stagingRoot,
      pageSettings: pageSettings,
      page: pageDirectory.map { .custom(directory: $0) } ?? .bundled,
      port: port,
      bindAddress: bindAddress,
      durability: durability,
      contentPolicy: contentPolicy)
  }

  /// The batch folder pattern in effect: the given one, or `{date} {time}` in kiosk mode.
  var effectiveBatchFolder: BatchFolderPattern? {
    batchFolder ?? (kiosk ? BatchFolderPattern.kioskDefault : nil)
  }

  /// Terminal UI only when standard output is a terminal and `--json` is off.
  func outputStyle(standardOutputIsTerminal: Bool) -> OutputStyle {
    json ? .json : standardOutputIsTerminal ? .terminal : .plain
  }
}

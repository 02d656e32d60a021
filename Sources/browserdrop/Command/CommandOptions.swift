import BrowserDrop
import BrowserDropForwarding
import FoundationEssentials

/// Everything the command line said, checked and ready to use: the parsed arguments (read
/// through them, `options.port`) and what their validation found on the system.
@dynamicMemberLookup
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

  /// The command line as parsed.
  let arguments: ParsedArguments
  /// `--to`, resolved: a folder that is or can become one, or an SMB share with its password.
  let destination: DestinationChoice?
  /// `--staging` with `~` expanded, or the library's default.
  let stagingRoot: URL
  /// The page's settings, with the strings read from `--strings`.
  let pageSettings: PageSettings
  /// `--page`'s folder, checked to hold index.html.
  let pageDirectory: URL?
  /// `--quiet-period`, or its default.
  let quietPeriod: Double

  /// The parsed value of a flag that needs no validation, `options.port`.
  subscript<Value>(dynamicMember keyPath: KeyPath<ParsedArguments, Value>) -> Value {
    arguments[keyPath: keyPath]
  }

  /// The server configuration for one session on `port`.
  func serverConfiguration(port: Int) -> BrowserDropServer.Configuration {
    BrowserDropServer.Configuration(
      allowedExtensions: arguments.allowedExtensions,
      maximumFileSize: arguments.maximumFileSize,
      reservedFreeSpace: arguments.reservedFreeSpace,
      idleTimeout: .milliseconds(Int((arguments.idleTimeout * 1000).rounded())),
      maximumConnections: arguments.maximumConnections,
      maximumConcurrentUploads: arguments.maximumConcurrentUploads,
      stagingRoot: stagingRoot,
      pageSettings: pageSettings,
      page: pageDirectory.map { .custom(directory: $0) } ?? .bundled,
      port: port,
      bindAddress: arguments.bindAddress,
      durability: arguments.durability,
      contentPolicy: arguments.contentPolicy,
      // The bundled page resumes every upload. A kiosk keeps cut-off uploads in its staging
      // root, so they outlive a batch and a restart; a one-shot session keeps them until it ends.
      resumableUploads: ResumableUploads(scope: arguments.kiosk ? .stagingRoot : .session),
      // Checked by the same rule when parsed (OperationsFlags.name), so it never fails here.
      localName: arguments.advertisedName.flatMap { try? LocalName($0) })
  }

  /// The batch folder pattern in effect: the given one, or `{date} {time}` in kiosk mode.
  var effectiveBatchFolder: BatchFolderPattern? {
    arguments.batchFolder ?? (arguments.kiosk ? BatchFolderPattern.kioskDefault : nil)
  }

  /// Terminal UI only when standard output is a terminal and `--json` is off.
  func outputStyle(standardOutputIsTerminal: Bool) -> OutputStyle {
    arguments.json ? .json : standardOutputIsTerminal ? .terminal : .plain
  }
}

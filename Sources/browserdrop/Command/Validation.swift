import BrowserDrop
import FoundationEssentials

extension ParsedArguments {
  /// Checks what parsing could not: the files and folders named (`--strings`, `--page`, `--to`,
  /// the SMB password's sources in `environment`) and the rules across flags. Runs after parsing
  /// and before the run, which never sees options that fail here.
  ///
  /// The checks run in a fixed order, so that with several mistakes the same one is reported:
  /// each `--strings` file, each `--page` folder, the strings' keys, then the rules between
  /// `--quiet-period`, `--to`, `--batch-folder`, `--smb-password-file` and `--kiosk`.
  func validated(environment: [String: String]) throws(UsageError) -> CommandOptions {
    var pageSettings = pageSettings
    for file in stringsFiles {
      pageSettings.strings = try Self.strings(from: file)
    }
    var pageDirectory: URL?
    for folder in pageFolders {
      pageDirectory = try Self.pageDirectory(folder)
    }
    // The bundled page ignores a key it doesn't know; a page of one's own may use any.
    if pageDirectory == nil,
      let unknown = pageSettings.strings.keys.sorted().first(where: {
        !PageStrings.keys.contains($0)
      })
    {
      throw UsageError(
        "--strings: the page has no text named \(TerminalText.quoted(unknown)); the keys are "
          + PageStrings.keys.joined(separator: ", ") + ".")
    }
    if quietPeriod != nil, !kiosk {
      throw UsageError("--quiet-period only applies with --kiosk.")
    }
    let destination = try destinationText.map { text throws(UsageError) in
      try DestinationChoice.resolve(text, passwordFile: smbPasswordFile, environment: environment)
    }
    if case .smb = destination, let batchFolder {
      try batchFolder.checkForSMB()
    }
    if smbPasswordFile != nil {
      guard case .smb(_, let credentials) = destination else {
        throw UsageError("--smb-password-file needs an smb:// destination in --to.")
      }
      // A guest address signs in without a password: a file given for it would be ignored.
      guard credentials != nil else {
        throw UsageError(
          "--smb-password-file needs a user in the --to address, as in smb://user@host/share.")
      }
    }
    if kiosk, destination == nil {
      throw UsageError("--kiosk needs a destination: add --to FOLDER or --to smb://host/share.")
    }
    return CommandOptions(
      arguments: self, destination: destination,
      stagingRoot: stagingPath.map {
        URL(filePath: PathText.expandingTilde($0), directoryHint: .isDirectory)
          .standardizedFileURL
      } ?? BrowserDropServer.Configuration.defaultStagingRoot,
      pageSettings: pageSettings, pageDirectory: pageDirectory,
      quietPeriod: quietPeriod ?? 60)
  }

  /// The replacement texts in the JSON file at `path` (`--strings`).
  private static func strings(from path: String) throws(UsageError) -> [String: String] {
    let flag = "--strings"
    guard let data = FileManager.default.contents(atPath: path) else {
      throw .badValue(flag, path, "the file can't be read")
    }
    guard let strings = try? JSONDecoder().decode([String: String].self, from: data) else {
      throw .badValue(
        flag, path, "it must hold a JSON object of strings, e.g. {\"title\": \"Drop here\"}")
    }
    return strings
  }

  /// The folder `path` (`--page`), which must hold index.html.
  private static func pageDirectory(_ path: String) throws(UsageError) -> URL {
    let expanded = PathText.expandingTilde(path)
    var isDirectory = false
    guard FileManager.default.fileExists(atPath: expanded, isDirectory: &isDirectory),
      isDirectory,
      FileManager.default.fileExists(
        atPath: expanded.hasSuffix("/") ? expanded + "index.html" : expanded + "/index.html")
    else {
      throw .badValue("--page", path, "a folder holding index.html")
    }
    return URL(filePath: expanded, directoryHint: .isDirectory).standardizedFileURL
  }
}

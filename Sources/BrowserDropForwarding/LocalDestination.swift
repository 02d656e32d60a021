public import FoundationEssentials

/// A folder on this computer. It is created (with its parents) when missing.
public struct LocalDestination: Destination {
  /// The folder files are delivered into.
  public let directory: URL

  /// A destination for `directory`, which must be a `file:` URL.
  public init(directory: URL) {
    self.directory = directory.standardizedFileURL
  }

  /// The folder's path.
  public var description: String { directory.path }
}

extension LocalDestination: DestinationBackend {
  func open() async throws -> any DestinationFileSystem {
    let fileSystem = LocalFileSystem(root: directory.path)
    try await fileSystem.connect()
    return fileSystem
  }

  var manifestIdentity: String { "file://" + directory.path }
}

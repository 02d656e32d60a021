public import FoundationEssentials

/// A file that arrived complete and waits in the session's staging folder.
public struct ReceivedFile: Sendable, Hashable {
  /// The cleaned relative path inside the session folder, `/`-separated.
  public let relativePath: String
  /// The file's size in bytes.
  public let size: Int
  /// Where the file is now, inside the session's staging folder.
  public var url: URL {
    switch location {
    case .given(let url): url
    case .inSession(let folder): folder.appending(path: relativePath, directoryHint: .notDirectory)
    }
  }
  /// When its last byte was stored.
  public let receivedAt: Date
  /// The MIME type detected from the content, for example `audio/mpeg`
  /// (`nil` when content sniffing is off).
  public let mimeType: String?
  /// A coarse classification of the content.
  public let kind: ContentKind

  /// Creates a received-file record.
  public init(
    relativePath: String, size: Int, url: URL, receivedAt: Date, mimeType: String?,
    kind: ContentKind
  ) {
    self.init(
      relativePath: relativePath, size: size, location: .given(url), receivedAt: receivedAt,
      mimeType: mimeType, kind: kind)
  }

  /// A record of a file in `sessionFolder`. A session can hold tens of thousands of records, so
  /// they share the folder's URL and each builds its own only when asked.
  init(
    relativePath: String, size: Int, sessionFolder: URL, receivedAt: Date, mimeType: String?,
    kind: ContentKind
  ) {
    self.init(
      relativePath: relativePath, size: size, location: .inSession(sessionFolder),
      receivedAt: receivedAt, mimeType: mimeType, kind: kind)
  }

  private init(
    relativePath: String, size: Int, location: Location, receivedAt: Date, mimeType: String?,
    kind: ContentKind
  ) {
    self.relativePath = relativePath
    self.size = size
    self.location = location
    self.receivedAt = receivedAt
    self.mimeType = mimeType
    self.kind = kind
  }

  private enum Location: Sendable {
    case given(URL)
    case inSession(URL)
  }

  private let location: Location

  /// Records are equal when every public property is (however the URL was given).
  public static func == (lhs: ReceivedFile, rhs: ReceivedFile) -> Bool {
    lhs.relativePath == rhs.relativePath && lhs.size == rhs.size && lhs.url == rhs.url
      && lhs.receivedAt == rhs.receivedAt && lhs.mimeType == rhs.mimeType && lhs.kind == rhs.kind
  }

  /// Hashes the public properties.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(relativePath)
    hasher.combine(size)
    hasher.combine(url)
    hasher.combine(receivedAt)
    hasher.combine(mimeType)
    hasher.combine(kind)
  }
}

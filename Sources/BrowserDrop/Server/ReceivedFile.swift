public import Foundation

/// A file that arrived complete and waits in the session's staging folder.
public struct ReceivedFile: Sendable, Hashable {
  /// The cleaned relative path inside the session folder, `/`-separated.
  public let relativePath: String
  /// The file's size in bytes.
  public let size: Int
  /// Where the file is now, inside the session's staging folder.
  public let url: URL
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
    self.relativePath = relativePath
    self.size = size
    self.url = url
    self.receivedAt = receivedAt
    self.mimeType = mimeType
    self.kind = kind
  }
}

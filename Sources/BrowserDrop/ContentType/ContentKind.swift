/// A coarse classification of a file's content, derived from its MIME type.
public enum ContentKind: String, Sendable, Hashable, CaseIterable {
  /// Sound: `audio/*`.
  case audio
  /// Moving pictures: `video/*`.
  case video
  /// Pictures: `image/*`.
  case image
  /// Documents: PDF, office formats, e-books.
  case document
  /// Plain or structured text.
  case text
  /// Archives and compressed files.
  case archive
  /// Anything else, or content that was not sniffed.
  case other
}

/// What content sniffing learned from a file's first bytes.
struct SniffResult: Sendable, Hashable {
  /// The MIME type to report, lowercased: libmagic's answer (for example `audio/x-wav`,
  /// `image/png`, `text/plain`), `application/octet-stream` when the content is unknown,
  /// `application/x-empty` for an empty file. An executable type that libmagic guessed but
  /// ``ExecutableSignature`` does not confirm is reported as `application/octet-stream`.
  var mimeType: String
  /// The text encoding libmagic found (`us-ascii`, `utf-8`, `utf-16le`…); `nil` for binary data.
  var charset: String?
  /// The coarse classification of ``mimeType``.
  var kind: ContentKind
  /// A description of the executable or script the content positively is, as a noun phrase
  /// without an article (for example `ELF executable for x86-64` or
  /// `shell script (#!/bin/sh)`); `nil` when no strong signature is present.
  var executable: String?
  /// libmagic's own MIME type before weak executable guesses were discarded.
  var libmagicMimeType: String

  /// The MIME type reported for content nobody could identify.
  static let unknownType = "application/octet-stream"
  /// The MIME type libmagic reports for an empty buffer.
  static let emptyType = "application/x-empty"

  /// Whether the content is unidentified or empty: such content never contradicts a name.
  var isUnknown: Bool { mimeType == Self.unknownType || mimeType == Self.emptyType }
}

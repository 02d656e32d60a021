/// What the server does with the content type it detects in each upload.
public enum ContentPolicy: Sendable, Hashable {
  /// Do not sniff content; `ReceivedFile.mimeType` is `nil`.
  case off
  /// Sniff every upload and refuse one whose content is a positively identified executable or
  /// script while its extension claims media, a document or text.
  case rejectDisguised
  /// Sniff every upload and accept only MIME types matching one of the patterns
  /// (for example `audio/*` or `application/pdf`).
  case strict(allowedTypes: [String])
}

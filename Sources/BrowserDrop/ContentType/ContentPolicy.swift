/// What the server does with the content type it detects in each upload.
///
/// Only strong signatures count as executables: ELF, PE (`MZ` with a PE header), Mach-O and `#!`
/// scripts. Content nobody can identify (`application/octet-stream`, empty files) never
/// contradicts a name.
public enum ContentPolicy: Sendable, Hashable {
  /// Do not sniff content; `ReceivedFile.mimeType` is `nil`.
  case off
  /// Sniff every upload and refuse one whose content is a positively identified executable or
  /// script while its extension claims media, a document or text (for example an ELF binary
  /// named `song.mp3`). Executables under names such as `setup.exe`, `run.sh` or `tool` are
  /// accepted.
  case rejectDisguised
  /// Sniff every upload, refuse disguised executables as `rejectDisguised` does, and accept only
  /// MIME types matching one of the patterns, compared case-insensitively (`audio/*`,
  /// `application/pdf`, `*/*`). Empty and unidentified content is refused unless a pattern admits
  /// `application/x-empty` or `application/octet-stream`.
  case strict(allowedTypes: [String])
}

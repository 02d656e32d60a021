/// The extensions that promise harmless content: media, documents and text. An executable under
/// one of these names is disguised; under any other name (`.exe`, `.sh`, `.py`, `.bin`, `.zip`,
/// none) it says what it is.
///
/// Script sources (`.py`, `.js`, `.sh`…) are deliberately not text here: a `#!` line is what
/// they are expected to start with.
enum FileExtensionClass: Sendable, Hashable {
  /// Audio, video and images.
  case media
  /// PDF, office files, e-books.
  case document
  /// Plain and structured text.
  case text

  /// The class of an extension (lowercase, without its dot); `nil` when it promises nothing.
  init?(_ fileExtension: String) {
    if Self.mediaExtensions.contains(fileExtension) {
      self = .media
    } else if Self.documentExtensions.contains(fileExtension) {
      self = .document
    } else if Self.textExtensions.contains(fileExtension) {
      self = .text
    } else {
      return nil
    }
  }

  private static let mediaExtensions: Set<String> = [
    // audio
    "mp3", "m4a", "m4b", "m4p", "wav", "wave", "flac", "ogg", "oga", "opus", "aac", "aif", "aiff",
    "aifc", "wma", "amr", "mid", "midi", "caf", "alac", "ape", "wv", "mka", "weba",
    // video
    "mp4", "m4v", "mov", "qt", "mkv", "webm", "avi", "wmv", "mpg", "mpeg", "3gp", "3g2", "flv",
    "ogv", "mts", "m2ts", "vob",
    // images
    "jpg", "jpeg", "jpe", "jfif", "png", "apng", "gif", "webp", "heic", "heif", "avif", "jxl",
    "tif", "tiff", "bmp", "svg", "svgz", "ico", "psd", "dng", "cr2", "cr3", "nef", "arw", "raf",
    "orf", "rw2",
  ]

  private static let documentExtensions: Set<String> = [
    "pdf", "doc", "docx", "docm", "dot", "dotx", "xls", "xlsx", "xlsm", "xlt", "xltx", "ppt",
    "pptx", "pptm", "pps", "ppsx", "odt", "ods", "odp", "odg", "odf", "ott", "epub", "mobi", "azw",
    "azw3", "fb2", "djvu", "rtf", "pages", "key", "numbers", "xps", "oxps", "ps", "eps", "wpd",
  ]

  private static let textExtensions: Set<String> = [
    "txt", "text", "md", "markdown", "rst", "adoc", "org", "tex", "csv", "tsv", "json", "jsonl",
    "ndjson", "geojson", "xml", "html", "htm", "xhtml", "css", "log", "yaml", "yml", "toml", "ini",
    "cfg", "conf", "srt", "vtt", "sub", "ass", "ics", "vcf", "nfo", "gpx", "kml",
  ]
}

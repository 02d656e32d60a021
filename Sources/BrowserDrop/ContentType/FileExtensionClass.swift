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
    // audio (audiobooks included)
    "mp3", "mp2", "mpga", "m4a", "m4b", "m4p", "m4r", "aax", "aa", "wav", "wave", "flac", "ogg",
    "oga", "opus", "spx", "aac", "ac3", "eac3", "dts", "aif", "aiff", "aifc", "au", "snd", "wma",
    "amr", "awb", "mid", "midi", "kar", "caf", "alac", "ape", "wv", "tta", "mpc", "dsf", "dff",
    "mka", "weba", "ra", "voc",
    // video (`.ts` is left out: it is also TypeScript source)
    "mp4", "m4v", "mov", "qt", "mkv", "webm", "avi", "wmv", "asf", "mpg", "mpeg", "mpe", "m2v",
    "dv", "3gp", "3g2", "flv", "f4v", "ogv", "ogm", "mts", "m2ts", "vob", "rm", "rmvb", "divx",
    "mxf",
    // images
    "jpg", "jpeg", "jpe", "jfif", "jp2", "j2k", "jpf", "jpx", "png", "apng", "gif", "webp", "heic",
    "heif", "avif", "jxl", "tif", "tiff", "bmp", "dib", "svg", "svgz", "ico", "cur", "icns", "tga",
    "pcx", "ppm", "pgm", "pbm", "pnm", "xbm", "xpm", "exr", "hdr", "dds", "emf", "wmf", "psd",
    "xcf", "dng", "raw", "cr2", "cr3", "crw", "nef", "nrw", "arw", "srf", "sr2", "raf", "orf",
    "rw2", "rwl", "pef", "srw", "x3f", "3fr", "erf", "kdc", "mrw",
  ]

  private static let documentExtensions: Set<String> = [
    "pdf", "doc", "docx", "docm", "dot", "dotx", "dotm", "xls", "xlsx", "xlsm", "xlsb", "xlt",
    "xltx", "ppt", "pptx", "pptm", "pps", "ppsx", "pot", "potx", "odt", "ods", "odp", "odg", "odf",
    "odm", "ott", "ots", "otp", "fodt", "fods", "fodp", "wps", "wri", "hwp", "abw", "pub", "vsd",
    "vsdx", "one", "epub", "mobi", "azw", "azw3", "kfx", "lit", "prc", "fb2", "cbz", "cbr", "cb7",
    "djvu", "djv", "rtf", "pages", "key", "numbers", "xps", "oxps", "ps", "eps", "wpd",
  ]

  private static let textExtensions: Set<String> = [
    "txt", "text", "md", "markdown", "rst", "adoc", "asciidoc", "org", "tex", "bib", "csv", "tsv",
    "tab", "json", "jsonc", "json5", "jsonl", "ndjson", "geojson", "webmanifest", "xml", "plist",
    "xsl", "xslt", "rss", "atom", "opml", "html", "htm", "xhtml", "css", "log", "yaml", "yml",
    "toml", "ini", "cfg", "conf", "properties", "srt", "vtt", "sub", "sbv", "ass", "ssa", "ttml",
    "smi", "lrc", "m3u", "m3u8", "pls", "xspf", "cue", "ics", "ifb", "vcf", "vcard", "nfo", "diz",
    "gpx", "kml", "diff", "patch", "po", "strings", "sfv", "md5", "sha1", "sha256",
  ]
}

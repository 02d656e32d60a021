extension ContentKind {
  /// The coarse kind of a MIME type (lowercased, without parameters).
  ///
  /// `audio/*`, `video/*` and `image/*` map to their kinds (`application/ogg` counts as audio);
  /// PDF, PostScript, office formats, e-books and RTF are documents; `text/*` and structured
  /// text (JSON, XML, YAML, JavaScript) are text; archives and compressed streams are archives.
  init(mimeType: String) {
    let type = mimeType.lowercased()
    if Self.documentTypes.contains(type)
      || Self.documentPrefixes.contains(where: { type.hasPrefix($0) })
    {
      self = .document
    } else if Self.archiveTypes.contains(type) {
      self = .archive
    } else if type.hasPrefix("audio/") || type == "application/ogg" {
      self = .audio
    } else if type.hasPrefix("video/") {
      self = .video
    } else if type.hasPrefix("image/") {
      self = .image
    } else if type.hasPrefix("text/") || Self.textTypes.contains(type)
      || type.hasSuffix("+json") || type.hasSuffix("+xml")
    {
      self = .text
    } else {
      self = .other
    }
  }

  private static let documentTypes: Set<String> = [
    "application/pdf", "application/postscript", "application/rtf", "text/rtf",
    "application/msword", "application/vnd.ms-excel", "application/vnd.ms-powerpoint",
    "application/vnd.ms-office", "application/vnd.ms-outlook", "application/vnd.ms-publisher",
    "application/vnd.ms-project", "application/vnd.visio", "application/epub+zip",
    "application/x-mobipocket-ebook", "application/vnd.amazon.ebook", "application/x-ibooks+zip",
    "application/vnd.apple.pages", "application/vnd.apple.keynote",
    "application/vnd.apple.numbers", "application/vnd.wordperfect", "application/x-abiword",
    "application/vnd.ms-xpsdocument", "application/oxps", "image/vnd.djvu", "application/x-dvi",
    "application/vnd.lotus-1-2-3", "application/x-hwp", "application/x-fictionbook+xml",
  ]

  private static let documentPrefixes = [
    "application/vnd.openxmlformats-officedocument.", "application/vnd.oasis.opendocument.",
    "application/vnd.ms-word", "application/vnd.ms-excel", "application/vnd.ms-powerpoint",
    "application/vnd.sun.xml.",
  ]

  private static let archiveTypes: Set<String> = [
    "application/zip", "application/gzip", "application/x-gzip", "application/x-tar",
    "application/x-7z-compressed", "application/x-xz", "application/x-bzip2", "application/x-bzip",
    "application/x-rar", "application/vnd.rar", "application/x-rar-compressed",
    "application/zstd", "application/x-zstd", "application/x-lzip", "application/x-lzma",
    "application/x-lz4", "application/x-lzh-compressed", "application/x-arj",
    "application/x-compress", "application/x-archive", "application/x-cpio",
    "application/x-iso9660-image", "application/x-apple-diskimage", "application/x-xar",
    "application/java-archive", "application/vnd.android.package-archive",
    "application/vnd.debian.binary-package", "application/x-rpm", "application/x-cab",
    "application/vnd.ms-cab-compressed", "application/x-stuffit", "application/x-squashfs",
  ]

  private static let textTypes: Set<String> = [
    "application/json", "application/x-ndjson", "application/xml", "application/javascript",
    "application/x-javascript", "application/ecmascript", "application/yaml",
    "application/x-yaml", "application/toml", "application/sql", "application/x-subrip",
    "application/x-wine-extension-ini", "application/x-php", "application/x-sh",
  ]
}

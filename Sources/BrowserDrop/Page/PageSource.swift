import BrowserDropSystem
import FoundationEssentials
import Glibc
import Synchronization

/// Serves the upload page: the bundled files or a custom folder, never anything outside it.
struct PageSource: Sendable {
  /// The policy sent with the bundled page: scripts, styles and requests from the page only.
  static let bundledPolicy =
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    + "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
    + "frame-ancestors 'none'"

  /// The bundled page's files as bytes, converted once.
  static let bundledFiles: [String: [UInt8]] = BundledPageFiles.files.mapValues { Array($0.utf8) }

  private enum Origin: Sendable {
    case bundled([String: [UInt8]])
    case directory(String)
  }

  private let origin: Origin
  let contentSecurityPolicy: String

  /// `bundle` stands for the files embedded from `Page/` (a test gives an empty one to see what
  /// a build without them answers).
  init(_ page: BrowserDropServer.Configuration.Page, bundle: [String: [UInt8]] = bundledFiles) {
    switch page {
    case .bundled:
      origin = .bundled(bundle)
      contentSecurityPolicy = Self.bundledPolicy
    case .custom(let directory, let policy):
      origin = .directory(directory.standardizedFileURL.path)
      contentSecurityPolicy = policy ?? Self.bundledPolicy
    }
  }

  /// The response to `GET target` (target without the query), a page file or a refusal.
  func response(for path: String) async -> [UInt8] {
    guard let decoded = PercentDecoding.decode(Substring(path)), decoded.hasPrefix("/") else {
      return Response.refusal(Refusal(.notFound))
    }
    var relative = String(decoded.dropFirst())
    if relative.isEmpty || relative.hasSuffix("/") { relative += "index.html" }
    let segments = relative.unicodeScalars.split(separator: "/", omittingEmptySubsequences: false)
      .map(Substring.init)
    guard
      segments.allSatisfy({ !$0.isEmpty && $0.utf8.first != UInt8(ascii: ".") }),
      !relative.contains("\\"), !relative.unicodeScalars.contains(where: { $0.value < 0x20 })
    else {
      return Response.refusal(Refusal(.notFound))
    }
    let body: [UInt8]?
    switch origin {
    case .bundled(let files):
      if files["index.html"] == nil { return Response.refusal(Refusal(.pageMissing)) }
      body = files[relative]
    case .directory(let directory):
      let file = relative
      do {
        body = try await BlockingPool.shared.run { () throws(Refusal) -> [UInt8]? in
          try Self.read(file, in: directory)
        }
      } catch {
        return Response.refusal(error)
      }
    }
    guard let body else { return Response.refusal(Refusal(.notFound)) }
    var headers: [(String, String)] = [("Content-Security-Policy", contentSecurityPolicy)]
    headers.append(("Cache-Control", "no-cache"))
    return Response.bytes(
      status: 200, contentType: Self.contentType(of: relative), body: body, extraHeaders: headers)
  }

  /// Reads a file of a custom page folder; symlinks are resolved and refused when they lead
  /// outside the folder (a sibling such as `/x/page-old` never passes for `/x/page`).
  private static func read(_ relative: String, in directory: String) throws(Refusal) -> [UInt8]? {
    guard
      let root = realpath(directory, nil).map({ pointer -> String in
        defer { free(pointer) }
        return String(cString: pointer)
      })
    else {
      throw Refusal(.pageMissing, "The page folder \(directory) does not exist.")
    }
    guard
      let resolved = realpath(root + "/" + relative, nil).map({ pointer -> String in
        defer { free(pointer) }
        return String(cString: pointer)
      })
    else {
      if relative == "index.html" {
        throw Refusal(.pageMissing, "The page folder has no index.html.")
      }
      return nil
    }
    // Bytes, not Characters: String comparison treats `café` and `cafe\u{301}` (two different
    // folders on Linux) as equal.
    guard resolved.utf8.starts(with: (root == "/" ? "/" : root + "/").utf8) else { return nil }
    let fd = open(resolved, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 64 * 1024)
    while true {
      let count = chunk.withUnsafeMutableBytes { buffer in
        try? Syscall.blocking("read") { Glibc.read(fd, buffer.baseAddress, buffer.count) }
      }
      guard let count else { return [] }
      if count == 0 { return bytes }
      bytes += chunk[..<count]
    }
  }

  static func contentType(of path: String) -> String {
    let ext = path.split(separator: ".").last.map { $0.lowercased() } ?? ""
    switch ext {
    case "html", "htm": return "text/html; charset=utf-8"
    case "js", "mjs": return "text/javascript; charset=utf-8"
    case "css": return "text/css; charset=utf-8"
    case "json", "map": return "application/json; charset=utf-8"
    case "webmanifest": return "application/manifest+json"
    case "svg": return "image/svg+xml"
    case "png": return "image/png"
    case "jpg", "jpeg": return "image/jpeg"
    case "gif": return "image/gif"
    case "webp": return "image/webp"
    case "ico": return "image/x-icon"
    case "woff2": return "font/woff2"
    case "woff": return "font/woff"
    case "txt": return "text/plain; charset=utf-8"
    default: return "application/octet-stream"
    }
  }
}

/// `config.json`: the page settings, encoded once per session and again only when the local
/// name in use changes (avahi-daemon confirms it about a second after the session listens).
final class PageConfiguration: Sendable {
  private struct Body: Encodable {
    var protocolVersion = 1
    var title: String?
    var language: String?
    var accentColor: String?
    var allowedExtensions: [String]?
    var maximumFileSize: Int?
    var maximumConcurrentUploads: Int
    var strings: [String: String]?
    var resumable: Resumable?
    /// The host name avahi-daemon publishes for the session (`intake.local`), once confirmed.
    var localName: String?
  }

  /// The resumable extension's capability: present only when it is on, so a page written for
  /// plain protocol v1 reads the same keys as ever.
  private struct Resumable: Encodable {
    var expiresAfter: Int
  }

  private let body: Body
  private let localName: @Sendable () -> LocalName?
  /// The last response, and the name it was made with.
  private let encoded: Mutex<(name: LocalName?, bytes: [UInt8])>

  /// The settings of `configuration`; `localName` says the name in use at each request.
  init(
    _ configuration: BrowserDropServer.Configuration,
    localName: @escaping @Sendable () -> LocalName? = { nil }
  ) {
    let settings = configuration.pageSettings
    body = Body(
      title: settings.title, language: settings.language, accentColor: settings.accentColor,
      allowedExtensions: configuration.allowedExtensions.map {
        Set($0.map { $0.lowercased() }).sorted()
      },
      maximumFileSize: configuration.maximumFileSize,
      maximumConcurrentUploads: configuration.maximumConcurrentUploads,
      strings: settings.strings.isEmpty ? nil : settings.strings,
      resumable: configuration.resumableUploads.map { Resumable(expiresAfter: $0.expirySeconds) })
    self.localName = localName
    encoded = Mutex((nil, Self.encode(body)))
  }

  /// The response to `GET /config.json` now.
  var response: [UInt8] {
    let name = localName()
    if let bytes = encoded.withLock({ $0.name == name ? $0.bytes : nil }) { return bytes }
    var body = self.body
    body.localName = name?.hostName
    let bytes = Self.encode(body)
    encoded.withLock { $0 = (name, bytes) }
    return bytes
  }

  private static func encode(_ body: Body) -> [UInt8] {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    let json = (try? encoder.encode(body)).map { [UInt8]($0) } ?? Array("{}".utf8)
    return Response.bytes(
      status: 200, contentType: "application/json; charset=utf-8", body: json,
      extraHeaders: [("Cache-Control", "no-store")])
  }
}

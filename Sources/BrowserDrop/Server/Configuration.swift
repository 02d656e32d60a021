public import FoundationEssentials

extension BrowserDropServer {
  /// Everything a session can be told before it starts. Every field has a default.
  public struct Configuration: Sendable {
    /// Where the upload page comes from.
    public enum Page: Sendable, Hashable {
      /// The page built into the library from the package's `Page/` folder.
      case bundled
      /// A folder of your own holding `index.html` and its files; served with the given
      /// `Content-Security-Policy` header (the bundled page's strict policy when `nil`).
      case custom(directory: URL, contentSecurityPolicy: String? = nil)
    }

    /// Accepted file extensions without the dot, compared case-insensitively; `nil` accepts any.
    public var allowedExtensions: Set<String>?
    /// The largest accepted file, in bytes; `nil` for no limit.
    public var maximumFileSize: Int?
    /// Free space always left on the staging volume, in bytes, counting what uploads in flight
    /// still have to write.
    public var reservedFreeSpace: Int
    /// How long a connection may stay silent, or take to send its request head, before it is
    /// closed.
    public var idleTimeout: Duration
    /// The most connections open at once; more are closed as soon as they are accepted.
    public var maximumConnections: Int
    /// How many uploads the page runs at once (advertised in `config.json`).
    public var maximumConcurrentUploads: Int
    /// The folder that holds session folders; created when missing.
    public var stagingRoot: URL
    /// Title, language, accent colour and text of the bundled page.
    public var pageSettings: PageSettings
    /// The page to serve.
    public var page: Page
    /// The TCP port: 80 falls back to 8080 when taken or not permitted; 0 picks a free port.
    public var port: Int
    /// The IP literal to listen on, for example `127.0.0.1`; `nil` listens on every interface.
    public var bindAddress: String?
    /// Whether each file is flushed to the disk (`fsync`) before the upload is answered 201.
    public var durability: Bool
    /// What to do with the content type detected in each upload.
    public var contentPolicy: ContentPolicy
    /// Whether uploads can be resumed (the protocol's resumable extension, advertised in
    /// `config.json`); `nil`, the default, serves plain protocol v1 byte for byte.
    public var resumableUploads: ResumableUploads?
    /// A name for the LAN, published through avahi-daemon while the session lasts: `NAME.local`
    /// (A and AAAA records for the addresses the server shows, not loopback or link-local ones)
    /// and an `_http._tcp` service "BrowserDrop on NAME". A name another machine holds moves to
    /// Avahi's alternative (`NAME-2`). The page shows the name in use (`config.json`'s
    /// `localName`); `localNameChanges` tells the host. Without avahi-daemon the session goes on
    /// by address. When the session ends the name stays published for 5 s, so that a next
    /// session with the same name and port (a kiosk's next batch) takes it over without a gap;
    /// then it is withdrawn. `nil`, the default, publishes nothing and never loads Avahi's
    /// library.
    public var localName: LocalName?

    /// The staging root used when none is given: `browserdrop` in the temporary directory.
    public static var defaultStagingRoot: URL {
      FileManager.default.temporaryDirectory.appending(
        path: "browserdrop", directoryHint: .isDirectory)
    }

    /// Creates a configuration; every argument has a sensible default.
    public init(
      allowedExtensions: Set<String>? = nil,
      maximumFileSize: Int? = nil,
      reservedFreeSpace: Int = 100 * 1024 * 1024,
      idleTimeout: Duration = .seconds(30),
      maximumConnections: Int = 64,
      maximumConcurrentUploads: Int = 3,
      stagingRoot: URL = Configuration.defaultStagingRoot,
      pageSettings: PageSettings = PageSettings(),
      page: Page = .bundled,
      port: Int = 80,
      bindAddress: String? = nil,
      durability: Bool = true,
      contentPolicy: ContentPolicy = .rejectDisguised,
      resumableUploads: ResumableUploads? = nil,
      localName: LocalName? = nil
    ) {
      self.allowedExtensions = allowedExtensions
      self.maximumFileSize = maximumFileSize
      self.reservedFreeSpace = reservedFreeSpace
      self.idleTimeout = idleTimeout
      self.maximumConnections = maximumConnections
      self.maximumConcurrentUploads = maximumConcurrentUploads
      self.stagingRoot = stagingRoot
      self.pageSettings = pageSettings
      self.page = page
      self.port = port
      self.bindAddress = bindAddress
      self.durability = durability
      self.contentPolicy = contentPolicy
      self.resumableUploads = resumableUploads
      self.localName = localName
    }
  }
}

/// How the bundled page looks and what it says.
public struct PageSettings: Sendable, Hashable {
  /// The page's title; the page's own English title when `nil`.
  public var title: String?
  /// A BCP 47 language tag for `<html lang>`, for example `es`.
  public var language: String?
  /// A CSS colour in `#RRGGBB` form for buttons and progress bars.
  public var accentColor: String?
  /// Replacements for the page's text, by key (`title`, `dropTitle`, `summary`…).
  public var strings: [String: String]

  /// Creates page settings.
  public init(
    title: String? = nil, language: String? = nil, accentColor: String? = nil,
    strings: [String: String] = [:]
  ) {
    self.title = title
    self.language = language
    self.accentColor = accentColor
    self.strings = strings
  }
}

import BrowserDropSystem
internal import CSMBClientLoader
import Glibc

/// One libsmbclient context for one delivery, so a connection is never reused across a host and
/// port it was not opened for (libsmbclient's connection cache ignores the port).
///
/// `@unchecked Sendable`: every method must run on ``DedicatedThread/smb``; the library is not
/// thread-safe even with a context per thread. ``SMBLibrary/load(_:)`` must have succeeded on that
/// thread before a context is created.
final class SMBContext: @unchecked Sendable {
  private let context: UnsafeMutablePointer<SMBCCTX>
  private let credentials: Credentials
  private let baseURL: String
  private let port: UInt16
  private let options: SMBOptions
  private let encryptionLevel: smbc_smb_encrypt_level
  /// libsmbclient's own check of a cached connection.
  private let checkServerDefault: smbc_check_server_fn?
  /// Whether the context keeps its one connection (``pinConnection()``).
  private var pinned = false

  /// Creates and initialises a context for `destination`. Runs on the SMB thread.
  init(for destination: SMBDestination) throws(SystemError) {
    guard let context = cbd_smbc_new_context() else { throw SystemError.last("smbc_new_context") }
    self.context = context
    self.credentials = destination.credentials
    self.baseURL =
      "smb://\(destination.host):\(destination.port)/" + SMBURL.encode(destination.share)
    self.port = UInt16(clamping: destination.port)
    self.options = destination.options
    self.encryptionLevel =
      switch destination.options.encryption {
      case .off: SMBC_ENCRYPTLEVEL_NONE
      case .requested: SMBC_ENCRYPTLEVEL_REQUEST
      case .required: SMBC_ENCRYPTLEVEL_REQUIRE
      }
    self.checkServerDefault = cbd_smbc_getFunctionCheckServer(context)

    cbd_smbc_setDebug(context, 0)
    cbd_smbc_setLogCallback(context, nil, SMBLog.callback)
    cbd_smbc_setOptionUserData(context, Unmanaged.passUnretained(self).toOpaque())
    cbd_smbc_setFunctionAuthDataWithContext(context, SMBContext.authenticate)
    cbd_smbc_setFunctionCheckServer(context, SMBContext.checkServer)
    // Otherwise a rejected password silently falls back to guest and guest shares "work".
    cbd_smbc_setOptionNoAutoAnonymousLogin(context, credentials.isGuest ? 0 : 1)
    cbd_smbc_setOptionUseKerberos(context, 0)
    cbd_smbc_setOptionFallbackAfterKerberos(context, 1)
    cbd_smbc_setPort(context, port)
    guard cbd_smbc_init_context(context) != nil else {
      let error = SystemError.last("smbc_init_context")
      cbd_smbc_free_context(context, 1)
      throw error
    }
    cbd_smbc_setTimeout(context, options.timeoutMilliseconds)
    cbd_smbc_setOptionProtocols(
      context, options.minimumProtocol.rawValue, options.maximumProtocol.rawValue)
    cbd_smbc_setOptionSmbEncryptionLevel(context, encryptionLevel)
  }

  /// From now on, never replaces the connection: libsmbclient opens a new one (silently, at the
  /// start of the next call) when it finds the cached one dead; a pinned context keeps the dead
  /// one, whose requests then fail. A delivery pins its context once it holds its marker
  /// (``DestinationFileSystem/holdMarker(_:)``), so every later request of the run goes over
  /// the connection that holds the marker open, and a released marker proves that none of them
  /// can still be carried out.
  func pinConnection() { pinned = true }

  /// libsmbclient's check of a cached connection before each call, unless ``pinConnection()``
  /// was called (then the connection is kept as it is, without the check's echo either).
  private static let checkServer: smbc_check_server_fn = { context, server in
    guard let context, let data = cbd_smbc_getOptionUserData(context) else { return 0 }
    let owner = Unmanaged<SMBContext>.fromOpaque(data).takeUnretainedValue()
    if owner.pinned { return 0 }
    return owner.checkServerDefault?(context, server) ?? 0
  }

  /// libsmbclient asks for credentials per server and share; answer from ``Credentials``.
  private static let authenticate: smbc_get_auth_data_with_context_fn = {
    context, _, _, workgroup, workgroupLength, username, usernameLength, password, passwordLength in
    guard let context, let data = cbd_smbc_getOptionUserData(context) else { return }
    let owner = Unmanaged<SMBContext>.fromOpaque(data).takeUnretainedValue()
    let credentials = owner.credentials
    if let workgroup, !credentials.workgroup.isEmpty {
      copy(credentials.workgroup, into: workgroup, capacity: Int(workgroupLength))
    }
    if let username { copy(credentials.username, into: username, capacity: Int(usernameLength)) }
    if let password { credentials.password.copy(into: password, capacity: Int(passwordLength)) }
  }

  private static func copy(_ text: String, into buffer: UnsafeMutablePointer<CChar>, capacity: Int)
  {
    guard capacity > 0 else { return }
    let bytes = Array(text.utf8.prefix(capacity - 1))
    for (index, byte) in bytes.enumerated() { buffer[index] = CChar(bitPattern: byte) }
    buffer[bytes.count] = 0
  }

  /// The request timeout the context was made with.
  var timeout: Duration { .milliseconds(options.timeoutMilliseconds) }

  /// The request timeout as libsmbclient holds it, read back from the context (milliseconds).
  var libraryTimeoutMilliseconds: Int32 { cbd_smbc_getTimeout(context) }

  /// The URL of `path` under the destination's share, every component percent-encoded.
  func url(_ path: RelativePath) -> String {
    path.isEmpty ? baseURL + "/" : baseURL + "/" + path.map(SMBURL.encode).joined(separator: "/")
  }

  /// `stat`s the share's root with the library's log captured, so an `EACCES` can be told apart:
  /// a rejected sign-in logs "SPNEGO login failed" at level 3; a denied share does not.
  func probeShare() -> (errno: Int32, log: [String])? {
    SMBLog.lines.removeAll()
    cbd_smbc_setDebug(context, 3)
    defer {
      cbd_smbc_setDebug(context, 0)
      SMBLog.lines.removeAll()
    }
    var info = Glibc.stat()
    if cbd_smbc_getFunctionStat(context)!(context, url([]), &info) == 0 { return nil }
    return (errno, SMBLog.lines)
  }

  /// `smbc_stat`.
  func stat(_ path: RelativePath) throws(SystemError) -> Glibc.stat {
    var info = Glibc.stat()
    guard cbd_smbc_getFunctionStat(context)!(context, url(path), &info) == 0 else {
      throw SystemError.last("smbc_stat")
    }
    return info
  }

  /// `smbc_mkdir`.
  func makeDirectory(_ path: RelativePath) throws(SystemError) {
    guard cbd_smbc_getFunctionMkdir(context)!(context, url(path), 0o755) == 0 else {
      throw SystemError.last("smbc_mkdir")
    }
  }

  /// `smbc_open`.
  func open(_ path: RelativePath, flags: Int32) throws(SystemError) -> SMBFile {
    guard let file = cbd_smbc_getFunctionOpen(context)!(context, url(path), flags, 0o644) else {
      throw SystemError.last("smbc_open")
    }
    return SMBFile(handle: file)
  }

  /// `smbc_write` of the whole buffer.
  func write(_ file: SMBFile, _ bytes: UnsafeRawBufferPointer) throws(SystemError) {
    var written = 0
    while written < bytes.count {
      let count = cbd_smbc_getFunctionWrite(context)!(
        context, file.handle, bytes.baseAddress! + written, bytes.count - written)
      guard count > 0 else { throw SystemError.last("smbc_write") }
      written += count
    }
  }

  /// `smbc_lseek` to `offset` from the start.
  func seek(_ file: SMBFile, to offset: Int64) throws(SystemError) {
    guard cbd_smbc_getFunctionLseek(context)!(context, file.handle, off_t(offset), SEEK_SET) >= 0
    else { throw SystemError.last("smbc_lseek") }
  }

  /// Forks a child process that signs in on a connection of its own, with this context's
  /// address, credentials and options, and writes stripes `stripe`, `stripe + stripes`, … (of
  /// `stripeSize` bytes) of the first `size` bytes of `source` to the existing file `path`,
  /// adding each stripe's bytes to `progress`. Returns the child's PID. See
  /// `cbd_smbc_fork_writer` for what the child does; it never runs Swift code.
  func forkWriter(
    to path: RelativePath, source: Int32, size: Int64, stripeSize: Int, stripe: Int, stripes: Int,
    progress: UnsafeMutablePointer<Int64>
  ) throws(SystemError) -> pid_t {
    try fork(signingInFor: path) { login in
      var job = cbd_smbc_writer(
        login: login, source_fd: source, size: size, stripe_size: Int64(stripeSize),
        stripe_index: Int32(stripe), stripe_count: Int32(stripes), progress: progress)
      return cbd_smbc_fork_writer(&job)
    }
  }

  /// How long the claim child waits for a request, or spends on one, before its alarm ends
  /// it: connect, sign-in, open and close are each bounded by the request timeout.
  var claimBoundSeconds: UInt32 { UInt32(clamping: options.timeoutMilliseconds / 1000 * 4 + 10) }

  /// Forks the claim child of a delivery: it signs in with this context's address,
  /// credentials and options on a connection of its own, holds `recordFile` (the manifest,
  /// open for appending and locked) and serves claims sent over `socket` (its end of a
  /// socketpair) until that reaches its end of file; it outlives this process. Returns the
  /// child's PID. See `cbd_smbc_fork_claimer`; it never runs Swift code.
  func forkClaimer(recordFile: Int32, socket: Int32) throws(SystemError) -> pid_t {
    try fork(signingInFor: []) { login in
      var job = cbd_smbc_claimer(
        login: login, record_fd: recordFile, socket_fd: socket, bound_seconds: claimBoundSeconds)
      return cbd_smbc_fork_claimer(&job)
    }
  }

  /// Runs `fork` with the C login for `path`: this context's address, credentials and
  /// options, the password in a buffer of our own that is wiped once the child has its copy.
  private func fork(
    signingInFor path: RelativePath, _ fork: (cbd_smbc_login) -> pid_t
  ) throws(SystemError) -> pid_t {
    let secret = UnsafeMutablePointer<CChar>.allocate(capacity: 256)
    credentials.password.copy(into: secret, capacity: 256)
    defer {
      explicit_bzero(secret, 256)
      secret.deallocate()
    }
    let pid = url(path).withCString { url in
      credentials.username.withCString { username in
        credentials.workgroup.withCString { workgroup in
          options.minimumProtocol.rawValue.withCString { minimum in
            options.maximumProtocol.rawValue.withCString { maximum in
              fork(
                cbd_smbc_login(
                  url: url, port: port, guest: credentials.isGuest ? 1 : 0, username: username,
                  workgroup: workgroup, password: secret,
                  timeout_ms: options.timeoutMilliseconds, min_protocol: minimum,
                  max_protocol: maximum, encryption_level: Int32(encryptionLevel.rawValue)))
            }
          }
        }
      }
    }
    guard pid > 0 else { throw SystemError.last("fork") }
    return pid
  }

  /// `smbc_read`; 0 at end of file.
  func read(
    _ file: SMBFile, into bytes: UnsafeMutableRawBufferPointer
  ) throws(SystemError)
    -> Int
  {
    let count = cbd_smbc_getFunctionRead(context)!(
      context, file.handle, bytes.baseAddress, bytes.count)
    guard count >= 0 else { throw SystemError.last("smbc_read") }
    return count
  }

  /// `smbc_close`; its failure means the data may not have arrived.
  func close(_ file: SMBFile) throws(SystemError) {
    guard cbd_smbc_getFunctionClose(context)!(context, file.handle) == 0 else {
      throw SystemError.last("smbc_close")
    }
  }

  /// `smbc_rename`. It overwrites an existing file (and even an empty folder): callers decide
  /// the final name first.
  func rename(_ from: RelativePath, to: RelativePath) throws(SystemError) {
    guard cbd_smbc_getFunctionRename(context)!(context, url(from), context, url(to)) == 0 else {
      throw SystemError.last("smbc_rename")
    }
  }

  /// Opens `path` for reading, sharing it with readers only, and closes it: throws `EBUSY`
  /// while a handle of any connection that may write, delete or rename the file is open on it
  /// (a rename's handle asks for delete access); readers don't stand in the way.
  func openSharingReads(_ path: RelativePath) throws(SystemError) {
    guard cbd_smbc_open_sharing_reads(context, url(path)) == 0 else {
      throw SystemError.last("smbc_open")
    }
  }

  /// `smbc_unlink`.
  func unlink(_ path: RelativePath) throws(SystemError) {
    guard cbd_smbc_getFunctionUnlink(context)!(context, url(path)) == 0 else {
      throw SystemError.last("smbc_unlink")
    }
  }

  /// The names of the files (not folders) in the folder at `path`, by `smbc_opendir` and
  /// `smbc_readdir`.
  func fileNames(in path: RelativePath) throws(SystemError) -> [String] {
    guard let folder = cbd_smbc_getFunctionOpendir(context)!(context, url(path)) else {
      throw SystemError.last("smbc_opendir")
    }
    defer { _ = cbd_smbc_getFunctionClosedir(context)!(context, folder) }
    let nameOffset = MemoryLayout<smbc_dirent>.offset(of: \.name)!
    var names: [String] = []
    while let entry = cbd_smbc_getFunctionReaddir(context)!(context, folder) {
      guard entry.pointee.smbc_type == UInt32(SMBC_FILE) else { continue }
      let name = (UnsafeRawPointer(entry) + nameOffset).assumingMemoryBound(to: CChar.self)
      names.append(String(cString: name))
    }
    return names
  }

  /// Ends the connection and frees the context.
  func free() {
    cbd_smbc_free_context(context, 1)
  }
}

/// libsmbclient's log lines, captured instead of printed. Only the SMB thread touches `lines`.
enum SMBLog {
  nonisolated(unsafe) static var lines: [String] = []

  static let callback: smbc_debug_callback_fn = { _, _, message in
    guard let message, lines.count < 200 else { return }
    lines.append(String(cString: message))
  }
}

/// An open libsmbclient file. `@unchecked Sendable`: only used on the SMB thread, like its
/// context; it is passed between jobs, never used concurrently.
struct SMBFile: @unchecked Sendable {
  let handle: OpaquePointer
}

import BrowserDropSystem
import FoundationEssentials
import Glibc

/// A session's place on disk: `session-<id>/` holds complete files only, laid out as sent;
/// `.session-<id>.incoming/` holds bodies still arriving, each under a hidden partial name.
struct StagingFolder: Sendable {
  static let sessionPrefix = "session-"

  let root: URL
  let session: URL
  let incoming: URL
  /// `session.path` and `incoming.path`, kept as strings: `URL.path` costs on every upload.
  let sessionPath: String
  let incomingPath: String

  init(root: URL, id: String = UUID().uuidString.lowercased()) {
    self.root = root.standardizedFileURL
    self.session = self.root.appending(path: Self.sessionPrefix + id, directoryHint: .isDirectory)
    self.incoming = self.root.appending(
      path: "." + Self.sessionPrefix + id + ".incoming", directoryHint: .isDirectory)
    self.sessionPath = session.path
    self.incomingPath = incoming.path
  }

  /// Creates the root, the session folder and the incoming folder. `claimingSharedRoot` when the
  /// root is the shared default one in the temporary folder (see `claimSharedRoot`).
  func create(claimingSharedRoot: Bool = false) throws(StagingError) {
    // Its refusals are sentences of their own; only the file-system calls below need wording.
    if claimingSharedRoot { try Self.claimSharedRoot(root.path) }
    do {
      try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    } catch {
      throw .unavailable(path: root.path, reason: error.operationFailureText)
    }
    // What this call made goes when a later step fails, and only that (a folder it found there
    // is not its own), so a later start() of the same server (the process had run out of
    // descriptors, say) finds its session's names free again.
    var made: [URL] = []
    func undo() {
      for folder in made.reversed() { rmdir(folder.path) }
    }
    do {
      for folder in [session, incoming] {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
        made.append(folder)
      }
    } catch {
      undo()
      throw .unavailable(path: root.path, reason: error.operationFailureText)
    }
    guard access(session.path, W_OK) == 0 else {
      let reason = String(cString: strerror(errno))
      undo()
      throw .unavailable(path: root.path, reason: reason)
    }
  }

  /// The default root sits in the shared temporary folder, where another local user could have
  /// made it first and planted links in it: create it private (0700), or accept an existing one
  /// only when it is a real folder of ours that nobody else can write to.
  static func claimSharedRoot(_ path: String) throws(StagingError) {
    if mkdir(path, 0o700) == 0 { return }
    guard errno == EEXIST else {
      throw .unavailable(path: path, reason: String(cString: strerror(errno)))
    }
    var info = stat()
    guard lstat(path, &info) == 0 else {
      throw .unavailable(path: path, reason: String(cString: strerror(errno)))
    }
    guard (info.st_mode & S_IFMT) == S_IFDIR else {
      throw .unavailable(path: path, reason: "it is not a folder (a link or a file is there)")
    }
    guard info.st_uid == geteuid() else {
      throw .unavailable(
        path: path, reason: "it belongs to another user; choose another staging folder")
    }
    guard info.st_mode & (S_IWGRP | S_IWOTH) == 0 else {
      throw .unavailable(path: path, reason: "other users can write to it")
    }
  }

  /// Whether the volume holding the root folds case: a probe file is created and looked up in
  /// the other case.
  func probeCaseInsensitivity() -> Bool {
    let name = ".case-probe-" + UUID().uuidString.lowercased()
    let lower = incoming.appending(path: name).path
    let upper = incoming.appending(path: name.uppercased()).path
    let fd = Glibc.open(lower, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
    guard fd >= 0 else { return false }
    Glibc.close(fd)
    defer { unlink(lower) }
    return access(upper, F_OK) == 0
  }

  /// Where a stored file's name went, for making it durable: every folder whose entries changed
  /// (the file's own, and the parent of each folder made for it), and the folders made.
  struct Placement: Sendable {
    /// The folder holding the file.
    var folder: String
    /// Folders whose entries changed, the file's own last.
    var changed: [String]
    /// Folders made for this file, outermost first.
    var created: [String]
  }

  /// Moves a complete partial file into place, creating its folders. Returns the folders whose
  /// entries changed (to be flushed for durability). Runs in the actor: metadata calls only.
  /// Never follows a symlink on the way: a folder replaced by a link (planted by another
  /// process) fails the upload instead of sending the file elsewhere. `sessionFD` is the session
  /// folder, open for the session's life, so a file at the top level costs no extra `open`.
  /// `made` hears of each folder as soon as it is made, even when a later step fails.
  func place(
    partial: PartialFile, at path: UploadPath, sessionFD: Int32,
    made: (String) -> Void = { _ in }
  ) throws(SystemError) -> Placement {
    let (folderFD, folder, created) = try openFolder(
      path.segments.dropLast(), creating: true, from: sessionFD, made: made)
    defer { if folderFD != sessionFD { close(folderFD) } }
    try partial.install(in: folderFD, as: String(path.segments.last!))
    // A folder made here changed its parent's entries.
    let changed = created.map { String($0[..<$0.lastIndex(of: "/")!]) } + [folder]
    return Placement(folder: folder, changed: changed, created: created)
  }

  /// Opens the session folder, read-only and never through a symlink.
  func openSession() throws(SystemError) -> Int32 {
    let fd = open(sessionPath, Self.folderFlags)
    guard fd >= 0 else { throw SystemError(call: "open", code: errno) }
    return fd
  }

  private static let folderFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC

  /// Opens each of `segments` below the session folder without following a symlink
  /// (`O_NOFOLLOW`), creating missing ones when asked. Starts from `sessionFD` when given (the
  /// caller keeps it; it is returned as is when `segments` is empty), else opens the session
  /// folder. Returns the last folder's descriptor, its path and the folders it made.
  private func openFolder(
    _ segments: ArraySlice<Substring>, creating: Bool, from sessionFD: Int32? = nil,
    made madeNow: (String) -> Void = { _ in }
  ) throws(SystemError) -> (Int32, String, [String]) {
    var fd: Int32
    if let sessionFD { fd = sessionFD } else { fd = try openSession() }
    var folder = sessionPath
    var made: [String] = []
    for segment in segments {
      let name = String(segment)
      if creating {
        if mkdirat(fd, name, 0o755) == 0 {
          made.append(folder + "/" + name)
          madeNow(folder + "/" + name)
        } else if errno != EEXIST {
          let code = errno
          if fd != sessionFD { close(fd) }
          throw SystemError(call: "mkdir", code: code)
        }
      }
      let next = openat(fd, name, Self.folderFlags)
      let code = errno
      if fd != sessionFD { close(fd) }
      guard next >= 0 else { throw SystemError(call: "open", code: code) }
      fd = next
      folder += "/" + name
    }
    return (fd, folder, made)
  }

  /// Deletes a stored file and any folders it leaves empty, never through a symlink.
  func remove(relativePath: String) {
    let segments = relativePath.unicodeScalars.split(separator: "/").map(Substring.init)
    guard let name = segments.last else { return }
    var folders = segments.dropLast()
    guard let (fd, _, _) = try? openFolder(folders, creating: false) else { return }
    unlinkat(fd, String(name), 0)
    close(fd)
    while let last = folders.popLast() {
      guard let (parent, _, _) = try? openFolder(folders, creating: false) else { return }
      let removed = unlinkat(parent, String(last), AT_REMOVEDIR) == 0
      close(parent)
      if !removed { return }
    }
  }

  /// Removes the incoming folder (what is left of uploads that did not complete).
  func removeIncoming() {
    try? FileManager.default.removeItem(at: incoming)
  }

  /// Removes the session folder and the incoming folder.
  func removeAll() {
    try? FileManager.default.removeItem(at: session)
    removeIncoming()
  }

  /// Removes every session folder and incoming folder in `root`, and nothing else.
  static func removeLeftovers(in root: URL) {
    let manager = FileManager.default
    guard let names = try? manager.contentsOfDirectory(atPath: root.path) else { return }
    for name in names where name.hasPrefix(sessionPrefix) || name.hasPrefix("." + sessionPrefix) {
      try? manager.removeItem(at: root.appending(path: name))
    }
  }
}

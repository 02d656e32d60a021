import Foundation
import Glibc

/// A session's place on disk: `session-<id>/` holds complete files only, laid out as sent;
/// `.session-<id>.incoming/` holds bodies still arriving, each under a hidden partial name.
struct StagingFolder: Sendable {
  static let sessionPrefix = "session-"

  let root: URL
  let session: URL
  let incoming: URL

  init(root: URL, id: String = UUID().uuidString.lowercased()) {
    self.root = root.standardizedFileURL
    self.session = self.root.appending(path: Self.sessionPrefix + id, directoryHint: .isDirectory)
    self.incoming = self.root.appending(
      path: "." + Self.sessionPrefix + id + ".incoming", directoryHint: .isDirectory)
  }

  /// Creates the root, the session folder and the incoming folder.
  func create() throws(BrowserDropError) {
    do {
      try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
      try FileManager.default.createDirectory(at: session, withIntermediateDirectories: false)
      try FileManager.default.createDirectory(at: incoming, withIntermediateDirectories: false)
    } catch {
      throw .stagingUnavailable(path: root.path, reason: (error as NSError).localizedDescription)
    }
    guard access(session.path, W_OK) == 0 else {
      throw .stagingUnavailable(path: root.path, reason: String(cString: strerror(errno)))
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

  /// The partial file of upload `id`.
  func partialPath(for id: UInt64) -> String {
    incoming.appending(path: ".upload-\(id).partial").path
  }

  /// The final place of a relative path.
  func finalURL(for path: UploadPath) -> URL {
    session.appending(path: path.value, directoryHint: .notDirectory)
  }

  /// Moves a complete partial file into place, creating its folders. Returns the folders whose
  /// entries changed (to be flushed for durability). Runs in the actor: metadata calls only.
  func place(partial: String, at path: UploadPath) throws(SystemError) -> [String] {
    var changed: [String] = []
    var folder = session.path
    for segment in path.segments.dropLast() {
      let next = folder + "/" + segment
      if mkdir(next, 0o755) == 0 {
        changed.append(folder)
      } else if errno != EEXIST {
        throw SystemError(call: "mkdir", code: errno)
      }
      folder = next
    }
    try Syscall.blocking("rename") { rename(partial, finalURL(for: path).path) }
    changed.append(folder)
    return changed
  }

  /// Deletes a stored file and any folders it leaves empty.
  func remove(relativePath: String) {
    unlink(session.appending(path: relativePath).path)
    var segments = relativePath.split(separator: "/").dropLast()
    while !segments.isEmpty {
      if rmdir(session.appending(path: segments.joined(separator: "/")).path) != 0 { break }
      segments = segments.dropLast()
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

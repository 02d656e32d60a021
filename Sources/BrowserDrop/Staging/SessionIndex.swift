/// The names a session uses: which files are complete and which folders they make, with the
/// conflict rules of protocol v1 (409 `path_conflict`).
struct SessionIndex: Sendable {
  /// Whether the staging volume treats `A.mp3` and `a.mp3` as one name.
  let caseInsensitive: Bool

  private(set) var files: [String: ReceivedFile] = [:]
  /// Name key (case-folded when the volume is case-insensitive) → the exact path.
  private var fileKeys: [String: String] = [:]
  /// Folder key → (exact folder path, how many files are inside it).
  private var folderKeys: [String: (path: String, count: Int)] = [:]

  init(caseInsensitive: Bool) {
    self.caseInsensitive = caseInsensitive
  }

  private func key(_ path: String) -> String { caseInsensitive ? path.lowercased() : path }

  /// Why `path` cannot be stored now, or `nil` when it can (a new name, or exactly the same
  /// path again: a retry that replaces the earlier file).
  func conflict(for path: UploadPath) -> Refusal? {
    let fileKey = key(path.value)
    if let existing = fileKeys[fileKey], existing != path.value {
      return Refusal(.pathConflict, "\(existing) is already in this session under another case.")
    }
    if let folder = folderKeys[fileKey] {
      return Refusal(.pathConflict, "\(folder.path) is already a folder in this session.")
    }
    for folder in path.folders {
      let folderKey = key(folder)
      if let file = fileKeys[folderKey] {
        return Refusal(.pathConflict, "\(file) is already a file in this session.")
      }
      if let existing = folderKeys[folderKey], existing.path != folder {
        return Refusal(
          .pathConflict, "\(existing.path) is already a folder in this session under another case."
        )
      }
    }
    return nil
  }

  /// Records a stored file; returns the file it replaced, if any.
  @discardableResult
  mutating func insert(_ file: ReceivedFile, at path: UploadPath) -> ReceivedFile? {
    if let previous = files.updateValue(file, forKey: path.value) { return previous }
    fileKeys[key(path.value)] = path.value
    for folder in path.folders {
      folderKeys[key(folder), default: (folder, 0)].count += 1
    }
    return nil
  }

  /// Removes the file at `relativePath`, or every file inside the folder `relativePath`.
  mutating func remove(_ relativePath: String) -> [ReceivedFile] {
    // Bytes, not Characters: in `a/\u{301}b` the slash and the mark are one Character.
    let prefix = Array((relativePath + "/").utf8)
    let removed = files.values.filter {
      $0.relativePath == relativePath || $0.relativePath.utf8.starts(with: prefix)
    }
    for file in removed {
      files.removeValue(forKey: file.relativePath)
      fileKeys.removeValue(forKey: key(file.relativePath))
      var current = ""
      for segment in file.relativePath.unicodeScalars.split(separator: "/").dropLast()
        .map(Substring.init)
      {
        current = current.isEmpty ? String(segment) : current + "/" + segment
        let folderKey = key(current)
        if let entry = folderKeys[folderKey] {
          folderKeys[folderKey] = entry.count > 1 ? (entry.path, entry.count - 1) : nil
        }
      }
    }
    return removed
  }
}

import FoundationEssentials
import Glibc

/// Gives a session folder that stays in the staging root a name of its own, so the cleanup of
/// crashed sessions at the next start (which removes the folders named with the library's
/// `StagingLayout.sessionPrefix`) leaves it alone.
enum KeptFolder {
  /// Renames `folder` to `<prefix> <date> <time>` (with ` 2`, ` 3`… when taken) next to it.
  /// Returns the new place, or `folder` itself when the rename fails.
  static func keep(_ folder: URL, prefix: String, date: Date = Date()) -> URL {
    let stamp = BatchFolderPattern.kioskDefault.folderName(date: date, number: 0)
    let parent = folder.deletingLastPathComponent()
    for attempt in 1...1000 {
      let name = attempt == 1 ? "\(prefix) \(stamp)" : "\(prefix) \(stamp) \(attempt)"
      let target = parent.appending(path: name, directoryHint: .isDirectory)
      // rename(2) refuses to replace a non-empty folder; check first so an empty one survives too.
      if FileManager.default.fileExists(atPath: target.path) { continue }
      if rename(folder.path, target.path) == 0 { return target }
      return folder
    }
    return folder
  }
}

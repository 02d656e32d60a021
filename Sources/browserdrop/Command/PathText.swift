import FoundationEssentials

/// NSString's `expandingTildeInPath`, which FoundationEssentials lacks, with the same results.
enum PathText {
  /// `path` with a leading `~` or `~user` replaced by that user's home folder (from the user
  /// database, as `expandingTildeInPath`), then one trailing `/` dropped. A path that does not
  /// start with `~` is returned as it is; an unknown user's `~user` stays.
  static func expandingTilde(_ path: String) -> String {
    guard path.hasPrefix("~") else { return path }
    let end = path.firstIndex(of: "/") ?? path.endIndex
    let user = path[path.index(after: path.startIndex)..<end]
    var result = path
    if let home = user.isEmpty
      ? FileManager.default.homeDirectoryForCurrentUser.path
      : FileManager.default.homeDirectory(forUser: String(user))?.path
    {
      result.replaceSubrange(path.startIndex..<end, with: home)
    }
    if result.utf8.count > 1 && result.hasSuffix("/") { result.removeLast() }
    return result
  }
}

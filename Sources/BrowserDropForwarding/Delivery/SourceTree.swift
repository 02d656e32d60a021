import BrowserDropSystem
import FoundationEssentials
import Glibc

/// The folder being forwarded, scanned once before anything is sent.
struct SourceTree: Sendable {
  /// A folder and what it holds, sorted by name so deliveries are reproducible.
  struct Folder: Sendable {
    var relative: RelativePath
    var folders: [Folder] = []
    var files: [SourceFile] = []
  }

  let root: Folder
  let fileCount: Int
  let byteCount: Int64

  /// Scans `path`. Only regular files and folders may be inside: anything else (a symbolic link,
  /// a socket) is refused before anything is written, since the folder is removed afterwards.
  static func scan(_ path: String) async throws -> SourceTree {
    try await DedicatedThread.localIO.run {
      var files = 0
      var bytes: Int64 = 0
      func scanFolder(_ relative: RelativePath) throws -> Folder {
        let absolute = ([path] + relative).joined(separator: "/")
        var folder = Folder(relative: relative)
        let names: [String]
        do {
          names = try FileManager.default.contentsOfDirectory(atPath: absolute).sorted()
        } catch {
          throw ForwardFailure(
            kind: .sourceUnreadable, place: .source,
            item: relative.isEmpty ? path : relative.joined(separator: "/"), errno: ENOENT)
        }
        for name in names
        where !(relative.isEmpty && (name == Manifest.fileName || name == FolderLock.fileName)) {
          let child = relative + [name]
          var info = stat()
          guard lstat(absolute + "/" + name, &info) == 0 else {
            throw ForwardFailure(
              kind: .sourceUnreadable, place: .source, item: child.joined(separator: "/"),
              errno: errno)
          }
          switch info.st_mode & S_IFMT {
          case S_IFDIR:
            folder.folders.append(try scanFolder(child))
          case S_IFREG:
            let file = SourceFile(
              absolutePath: absolute + "/" + name, relative: child, size: Int64(info.st_size))
            folder.files.append(file)
            files += 1
            bytes += file.size
          default:
            throw ForwardFailure(
              kind: .sourceUnreadable, place: .source, item: child.joined(separator: "/"),
              errno: EINVAL)
          }
        }
        return folder
      }
      let root = try scanFolder([])
      return SourceTree(root: root, fileCount: files, byteCount: bytes)
    }
  }
}

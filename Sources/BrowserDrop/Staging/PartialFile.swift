import BrowserDropSystem
import CBrowserDropLinux
import Glibc
import Synchronization

/// The file an upload's body is written to until it is complete, then installed under its
/// final name in the session folder.
///
/// Where the volume can (`O_TMPFILE`: ext4, xfs, btrfs, tmpfs), the file has no name at all
/// until `linkat` installs it. An interrupted upload then leaves nothing behind, and the slow
/// part of making a file (allocating its inode) happens without holding any folder's lock, so
/// concurrent uploads do not queue on the incoming folder's lock: in the many-small-files
/// workload the kernel spent a fifth of the server's time spinning on that lock. Elsewhere
/// the file is a hidden name in the session's incoming folder, created exclusively and never
/// through a link, and renamed into place.
struct PartialFile: Sendable {
  /// How partial files are made on this session's volume; probed once when the session starts.
  enum Kind: Sendable {
    /// `O_TMPFILE` files installed with `linkat`.
    case anonymous
    /// Hidden names in the incoming folder, installed with `rename`.
    case named
  }

  /// The open file; the connection that made it closes it.
  let fd: Int32
  /// The hidden name in the incoming folder; `nil` for an anonymous file.
  let path: String?

  /// Creates the partial file for upload `id` in `incoming`.
  static func create(in incoming: String, id: UInt64, kind: Kind) throws(SystemError) -> PartialFile
  {
    switch kind {
    case .anonymous:
      let fd = open(incoming, cbd_o_tmpfile() | O_RDWR | O_CLOEXEC, 0o644)
      guard fd >= 0 else { throw SystemError(call: "open", code: errno) }
      return PartialFile(fd: fd, path: nil)
    case .named:
      let path = incoming + "/.upload-\(id).partial"
      let flags = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC
      var fd = open(path, flags, 0o644)
      // Something is already at the name (a link planted there, say): remove it, since
      // `unlink` does not follow links, and create the name afresh, exclusively.
      if fd < 0, errno == EEXIST, unlink(path) == 0 {
        fd = open(path, flags, 0o644)
      }
      guard fd >= 0 else { throw SystemError(call: "open", code: errno) }
      return PartialFile(fd: fd, path: path)
    }
  }

  /// Gives the complete file its final name `name` in the folder open as `folderFD`, replacing
  /// whatever is there (the server has already decided that it may: a new upload of a path
  /// replaces the earlier one) without following it if it is a link.
  func install(in folderFD: Int32, as name: String) throws(SystemError) {
    if let path {
      try Syscall.blocking("rename") { renameat(AT_FDCWD, path, folderFD, name) }
      return
    }
    if link(into: folderFD, as: name) == 0 { return }
    guard errno == EEXIST else { throw SystemError(call: "linkat", code: errno) }
    // `linkat` never replaces: link under a hidden name beside the old file, then rename over
    // it, which replaces it in one step.
    let hidden = ".replacing-\(UInt64.random(in: 0...UInt64.max))"
    try Syscall.blocking("linkat") { link(into: folderFD, as: hidden) }
    do {
      try Syscall.blocking("rename") { renameat(folderFD, hidden, folderFD, name) }
    } catch {
      unlinkat(folderFD, hidden, 0)
      throw error
    }
  }

  /// Removes the hidden name of a file that will not be installed (an anonymous file vanishes
  /// with its descriptor).
  func removeName() {
    if let path { unlink(path) }
  }

  /// Whether `incoming` can hold anonymous partial files: one is made and linked to a probe name.
  static func probeKind(in incoming: String) -> Kind {
    guard let file = try? create(in: incoming, id: 0, kind: .anonymous) else { return .named }
    defer { close(file.fd) }
    let probe = incoming + "/.anonymous-probe"
    unlink(probe)
    guard linkat(AT_FDCWD, file.descriptorLink, AT_FDCWD, probe, AT_SYMLINK_FOLLOW) == 0 else {
      return .named
    }
    unlink(probe)
    return .anonymous
  }

  /// Links the anonymous file as `name` in `folderFD`; returns what `linkat` returns.
  ///
  /// `AT_EMPTY_PATH` links the descriptor itself. Linux 6.10 and later allow it to whoever
  /// opened the file; before, only with CAP_DAC_READ_SEARCH, and it fails with ENOENT. The
  /// /proc link works for anyone, but resolving `/proc/self/fd/N` walks four procfs names on
  /// every upload. The first refusal of `AT_EMPTY_PATH` that the /proc link then gets past
  /// switches to the /proc link for the rest of the process.
  private func link(into folderFD: Int32, as name: String) -> Int32 {
    if Self.emptyPathLinks.load(ordering: .relaxed) {
      if linkat(fd, "", folderFD, name, Self.atEmptyPath) == 0 { return 0 }
      guard errno == ENOENT || errno == EPERM else { return -1 }
      let result = linkat(AT_FDCWD, descriptorLink, folderFD, name, AT_SYMLINK_FOLLOW)
      if result == 0 { Self.emptyPathLinks.store(false, ordering: .relaxed) }
      return result
    }
    return linkat(AT_FDCWD, descriptorLink, folderFD, name, AT_SYMLINK_FOLLOW)
  }

  /// `AT_EMPTY_PATH` (linux/fcntl.h), which Glibc exports only with _GNU_SOURCE.
  private static let atEmptyPath: Int32 = 0x1000

  /// Whether `linkat` with `AT_EMPTY_PATH` is still thought to work here.
  private static let emptyPathLinks = Atomic(true)

  /// The open file as a path `linkat` can follow, whatever the process may do.
  private var descriptorLink: String { "/proc/self/fd/\(fd)" }
}

internal import CMagic
import FoundationEssentials
import Glibc

/// A compiled magic database mapped once, read in place by every handle.
///
/// `@unchecked Sendable`: the mapping is read by libmagic under each handle's lock and unmapped
/// once, in `deinit`, after every handle holding it has closed its cookie.
final class MappedDatabase: MagicDatabaseMemory, @unchecked Sendable {
  /// The start of the mapping.
  let base: UnsafeMutableRawPointer
  /// The compiled database file that is mapped.
  let path: String
  /// The database's length in bytes.
  let size: Int
  /// The mapped file, open for reading (`pread`) until `deinit`.
  let descriptor: Int32

  /// Maps the one compiled database `databasePath` names (`nil`: libmagic's default list, such
  /// as `/etc/magic:/usr/share/misc/magic`, or `$MAGIC`). `nil` when it names anything else, a
  /// source file with definitions or several databases, or the file cannot be mapped: the
  /// handles then load it themselves with `magic_load`.
  init?(for databasePath: String?) {
    guard
      let list = databasePath ?? magic_getpath(nil, 0).map({ String(cString: $0) }),
      let path = Self.compiledDatabase(in: list)
    else { return nil }
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    var info = stat()
    guard fstat(fd, &info) == 0, info.st_size > 0 else {
      close(fd)
      return nil
    }
    // Private and writable, as `magic_load` maps it: libmagic may byte-swap a foreign-endian
    // file in place, which then copies only the pages it writes.
    guard
      let base = mmap(nil, Int(info.st_size), PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0),
      base != MAP_FAILED
    else {
      close(fd)
      return nil
    }
    self.base = base
    descriptor = fd
    self.size = Int(info.st_size)
    self.path = path
  }

  deinit {
    munmap(base, size)
    close(descriptor)
  }

  /// The path of the single compiled database in a colon-separated magic path, as libmagic
  /// resolves it (`NAME.mgc` beside a plain `NAME`); files holding nothing but comments (the
  /// stock `/etc/magic`) are skipped.
  static func compiledDatabase(in list: String) -> String? {
    var found: String?
    for component in list.split(separator: ":").map(String.init) {
      let compiled = component.hasSuffix(".mgc") ? component : component + ".mgc"
      if access(compiled, R_OK) == 0 {
        guard found == nil else { return nil }
        found = compiled
      } else if !Self.holdsNoDefinitions(component) {
        return nil
      }
    }
    return found
  }

  /// Whether the file at `path` is missing or has only blank and `#` comment lines.
  private static func holdsNoDefinitions(_ path: String) -> Bool {
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
      return access(path, F_OK) != 0
    }
    return text.split(whereSeparator: \.isNewline).allSatisfy { line in
      let trimmed = line.drop(while: { $0 == " " || $0 == "\t" })
      return trimmed.isEmpty || trimmed.hasPrefix("#")
    }
  }
}

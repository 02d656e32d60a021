import BrowserDropSystem
import FoundationEssentials
import Glibc

/// The record, inside the folder being forwarded, of what has arrived where, so a delivery that
/// was interrupted can be finished without sending a file twice.
///
/// One JSON object per line, appended and `fsync`ed: `installing` before a file's final name is
/// claimed, `delivered` once it is in place and checked. Lines for other destinations are kept
/// but ignored. The file has a hidden name and is never forwarded; it goes with the folder.
struct Manifest: Sendable {
  static let fileName = ".browserdrop-forwarded"

  struct Record: Codable, Sendable {
    enum State: String, Codable, Sendable {
      case installing
      case delivered
    }

    var destination: String
    var source: String
    var target: [String]
    var state: State
    var size: Int64
  }

  let path: String
  let destination: String
  /// The latest record of each source file for this destination.
  private(set) var latest: [String: Record] = [:]

  /// Reads the manifest in `folder`, if any.
  static func load(folder: String, destination: String) async throws -> Manifest {
    await DedicatedThread.localIO.run {
      var manifest = Manifest(path: folder + "/" + fileName, destination: destination)
      guard let data = FileManager.default.contents(atPath: manifest.path) else { return manifest }
      let decoder = JSONDecoder()
      for line in data.split(separator: UInt8(ascii: "\n")) {
        // A line cut short by a crash is skipped: its file is then simply sent again.
        guard let record = try? decoder.decode(Record.self, from: Data(line)),
          record.destination == destination
        else { continue }
        manifest.latest[record.source] = record
      }
      return manifest
    }
  }

  /// Appends a record and makes it durable.
  mutating func append(
    _ state: Record.State, source: SourceFile, target: RelativePath
  )
    async throws
  {
    let record = Record(
      destination: destination, source: source.relativeText, target: target, state: state,
      size: source.size)
    latest[record.source] = record
    let path = self.path
    try await DedicatedThread.localIO.run {
      let encoder = JSONEncoder()
      encoder.outputFormatting = .sortedKeys
      var line = try encoder.encode(record)
      line.append(UInt8(ascii: "\n"))
      let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
      guard fd >= 0 else {
        throw ForwardFailure(
          kind: .sourceUnreadable, place: .source, item: Manifest.fileName, errno: errno)
      }
      defer { close(fd) }
      let written = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
      guard written == line.count, fsync(fd) == 0 else {
        throw ForwardFailure(
          kind: .sourceUnreadable, place: .source, item: Manifest.fileName, errno: errno)
      }
    }
  }
}

import BrowserDropTestSupport
import Foundation
import Testing

@testable import BrowserDropForwarding

/// A scratch folder tree for one test, removed at the end (or by `remove()`).
typealias Scratch = TemporaryFolder

extension TemporaryFolder {
  /// The scratch root.
  var root: URL { url }

  /// Writes `files` (relative path → contents) under `folder` inside the scratch root.
  @discardableResult
  func folder(_ name: String, _ files: [String: Data], emptyFolders: [String] = []) throws -> URL {
    let folder = root.appendingPathComponent(name)
    try write(files, into: folder)
    for empty in emptyFolders {
      try FileManager.default.createDirectory(
        at: folder.appendingPathComponent(empty), withIntermediateDirectories: true)
    }
    return folder
  }
}

/// Writes files (relative path → contents) under `folder`, creating folders as needed.
func write(_ files: [String: Data], into folder: URL) throws {
  try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
  for (path, data) in files {
    let url = folder.appendingPathComponent(path)
    try FileManager.default.createDirectory(
      at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
    try data.write(to: url)
  }
}

/// Every regular file under `folder`, relative path → contents; folders listed with nil.
func contents(of folder: URL) throws -> [String: Data?] {
  var result: [String: Data?] = [:]
  let base = folder.standardizedFileURL.path
  guard let enumerator = FileManager.default.enumerator(atPath: base) else { return result }
  while let relative = enumerator.nextObject() as? String {
    let path = base + "/" + relative
    var isDirectory: ObjCBool = false
    _ = FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
    result[relative] =
      isDirectory.boolValue ? Data?.none : FileManager.default.contents(atPath: path)
  }
  return result
}

/// How ``destinationContents(of:)`` shows a claim: any attempt's token
/// (`browserdrop claim <attempt id>` and a newline).
let aClaim = Data("<a claim>".utf8)

/// The name ``destinationContents(of:)`` lists a run's marker under.
let aMarker = "<marker>"

/// ``contents(of:)`` of a destination folder, with each claim's token shown as ``aClaim`` (the
/// attempt ids are random) and each run's marker (`.browserdrop-<id>.live`, empty) listed as
/// ``aMarker``, once per marker (`<marker>`, `<marker> 2`, …).
func destinationContents(of folder: URL) throws -> [String: Data?] {
  var shown: [String: Data?] = [:]
  var markers = 0
  for (name, data) in try contents(of: folder).sorted(by: { $0.key < $1.key }) {
    if name.hasPrefix(".browserdrop-"), name.hasSuffix(".live") {
      markers += 1
      shown[markers == 1 ? aMarker : "\(aMarker) \(markers)"] = data
    } else if let data, isClaimToken(data) {
      shown[name] = aClaim
    } else {
      shown[name] = data
    }
  }
  return shown
}

/// Whether `data` is a claim's token: `browserdrop claim `, 16 hex digits, a newline.
func isClaimToken(_ data: Data) -> Bool {
  let text = String(decoding: data, as: UTF8.self)
  guard text.hasPrefix("browserdrop claim "), text.hasSuffix("\n") else { return false }
  let id = text.dropFirst("browserdrop claim ".count).dropLast()
  return id.count == 16 && id.allSatisfy(\.isHexDigit)
}

/// Deterministic pseudo-random bytes.
func bytes(_ count: Int, seed: UInt64) -> Data {
  var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
  var data = Data(count: count)
  data.withUnsafeMutableBytes { (buffer: UnsafeMutableRawBufferPointer) in
    for index in 0..<count {
      state ^= state << 13
      state ^= state >> 7
      state ^= state << 17
      buffer[index] = UInt8(truncatingIfNeeded: state)
    }
  }
  return data
}

/// The nested, unicode-named tree most tests deliver.
let sampleTree: [String: Data] = [
  "report.pdf": bytes(300_000, seed: 1),
  "empty.txt": Data(),
  "100% done.txt": Data("percent".utf8),
  "Fotos/Ünïcødé 日本.jpg": bytes(2_500_000, seed: 2),
  "Fotos/2024/a b#c.png": bytes(70_000, seed: 3),
  "Fotos/2024/deep/deeper/last.bin": bytes(9_000_000, seed: 4),
]

/// Expected destination view of `sampleTree` (plus the empty folder).
func expectedSample(emptyFolder: String = "Leer") -> [String: Data?] {
  var expected: [String: Data?] = [:]
  for (path, data) in sampleTree {
    expected[path] = data
    var parts = path.split(separator: "/").dropLast()
    while !parts.isEmpty {
      expected[parts.joined(separator: "/")] = Data?.none
      parts = parts.dropLast()
    }
  }
  expected[emptyFolder] = Data?.none
  return expected
}

/// Runs `forward` and cancels it once `completedFiles` files have arrived; waits for it to stop.
func forwardCancelled(
  after completedFiles: Int, folder: URL, to destination: some Destination
) async {
  let (reached, signal) = AsyncStream<Void>.makeStream()
  await withThrowingTaskGroup(of: Void.self) { group in
    group.addTask {
      _ = try await Forwarder().forward(folder: folder, to: destination) { progress in
        guard progress.completedFiles == completedFiles, progress.currentFile == nil else {
          return
        }
        signal.yield()
        // Hold the delivery here until the test cancels it (bounded).
        try? await Task.sleep(for: .seconds(30))
      }
    }
    for await _ in reached { break }
    group.cancelAll()
    await #expect(throws: CancellationError.self) { try await group.next() }
  }
}

extension Forwarder {
  /// A forwarder that ends its delivery at `checkpoint` (the test seam ``Checkpoint``).
  static func stopping(at checkpoint: Checkpoint) -> Forwarder {
    var forwarder = Forwarder()
    forwarder.crashPoint = checkpoint
    return forwarder
  }
}

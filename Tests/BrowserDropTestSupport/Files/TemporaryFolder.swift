package import Foundation

/// A temporary folder for one test, removed at the end.
package final class TemporaryFolder: Sendable {
  /// The folder.
  package let url: URL

  /// Creates `<temporary directory>/<prefix>-<UUID>`.
  package init(prefix: String = "browserdrop-test") throws {
    url = URL(filePath: NSTemporaryDirectory()).appending(
      path: "\(prefix)-\(UUID().uuidString)", directoryHint: .isDirectory)
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
  }

  deinit { remove() }

  /// Removes the folder and everything in it now (it is removed at the end anyway).
  package func remove() {
    try? FileManager.default.removeItem(at: url)
  }

  /// A path inside the folder.
  package func path(_ name: String) -> URL {
    url.appending(path: name)
  }

  /// Writes a file of `size` bytes with a recognisable, position-dependent pattern.
  @discardableResult
  package func makeFile(_ name: String, size: Int, seed: UInt8 = 1) throws -> URL {
    let file = path(name)
    try FileManager.default.createDirectory(
      at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
    // One pseudo-random MiB per seed, repeated with each copy stamped with its index: fast to
    // make in a debug build, and no two files (or two chunks of one) are alike.
    var block = [UInt8](repeating: 0, count: min(size, 1 << 20))
    var state = UInt32(seed) &* 2_654_435_761 &+ 1
    for index in block.indices {
      state = state &* 1_664_525 &+ 1_013_904_223
      block[index] = UInt8(truncatingIfNeeded: state >> 24)
    }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(size)
    var chunk: UInt64 = 0
    while bytes.count < size {
      var copy = block
      withUnsafeBytes(of: chunk.littleEndian) { stamp in
        for (offset, byte) in stamp.enumerated() where offset < copy.count { copy[offset] ^= byte }
      }
      bytes += copy.prefix(size - bytes.count)
      chunk += 1
    }
    try Data(bytes).write(to: file)
    return file
  }

  /// Regular files under `folder`, relative paths, hidden ones left out.
  package static func files(in folder: URL) -> [String] {
    guard let walker = FileManager.default.enumerator(atPath: folder.path) else { return [] }
    var result: [String] = []
    while let name = walker.nextObject() as? String {
      let isHidden = name.split(separator: "/").contains { $0.hasPrefix(".") }
      if (walker.fileAttributes?[.type] as? FileAttributeType) == .typeRegular, !isHidden {
        result.append(name)
      }
    }
    return result.sorted()
  }
}

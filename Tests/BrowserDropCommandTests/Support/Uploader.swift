import Foundation

/// Uploads with `curl` as a subprocess, the way the page does: `POST /upload?path=…`.
enum Uploader {
  /// Uploads `file` as `path` and returns the HTTP status (0 when curl could not connect).
  /// `rate` limits the speed (curl's `--limit-rate`, e.g. `200K`) so an upload stays in flight.
  @discardableResult
  static func upload(
    _ file: URL, as path: String, port: Int, rate: String? = nil
  ) async throws -> Int {
    let process = try start(file, as: path, port: port, rate: rate)
    return try await status(of: process)
  }

  /// Starts an upload and returns the running curl process.
  static func start(
    _ file: URL, as path: String, port: Int, rate: String? = nil
  ) throws -> ChildProcess {
    let allowed = CharacterSet(
      charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
    let encoded = path.addingPercentEncoding(withAllowedCharacters: allowed) ?? path
    var arguments = [
      "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST",
      "-H", "Content-Type: application/octet-stream", "--data-binary", "@" + file.path,
    ]
    if let rate { arguments += ["--limit-rate", rate] }
    arguments.append("http://127.0.0.1:\(port)/upload?path=\(encoded)")
    return try ChildProcess("/usr/bin/curl", arguments, output: .pipe, error: .null)
  }

  /// Starts an upload of `size` bytes as `path` whose body the test writes to the returned
  /// process (`write`, then `closeInput`): it stays in flight exactly as long as the test wants.
  static func startFed(as path: String, size: Int, port: Int) throws -> ChildProcess {
    let allowed = CharacterSet(
      charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
    let encoded = path.addingPercentEncoding(withAllowedCharacters: allowed) ?? path
    // `-T -` streams standard input; the length given and `Transfer-Encoding` and `Expect`
    // emptied, so the body is sent as it comes, with a Content-Length (no chunks).
    let arguments = [
      "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "-T", "-",
      "-H", "Content-Type: application/octet-stream", "-H", "Content-Length: \(size)",
      "-H", "Transfer-Encoding:", "-H", "Expect:",
      "http://127.0.0.1:\(port)/upload?path=\(encoded)",
    ]
    return try ChildProcess("/usr/bin/curl", arguments, input: .pipe, output: .pipe, error: .null)
  }

  /// Waits for a started upload and returns its HTTP status (0 when it did not complete).
  static func status(of upload: ChildProcess) async throws -> Int {
    if await upload.wait(timeout: .seconds(120)) == nil {
      upload.signal(SIGKILL)
      _ = await upload.wait(timeout: .seconds(10))
    }
    return Int(String(decoding: upload.output, as: UTF8.self)) ?? 0
  }
}

/// A temporary folder for one test, removed at the end.
final class TemporaryFolder: Sendable {
  let url: URL

  init() throws {
    url = URL(filePath: NSTemporaryDirectory()).appending(
      path: "browserdrop-command-\(UUID().uuidString)", directoryHint: .isDirectory)
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
  }

  deinit {
    try? FileManager.default.removeItem(at: url)
  }

  /// A path inside the folder.
  func path(_ name: String) -> URL {
    url.appending(path: name)
  }

  /// Writes a file of `size` bytes with a recognisable, position-dependent pattern.
  @discardableResult
  func makeFile(_ name: String, size: Int, seed: UInt8 = 1) throws -> URL {
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
  static func files(in folder: URL) -> [String] {
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

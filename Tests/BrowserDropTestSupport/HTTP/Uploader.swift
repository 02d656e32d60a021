package import Foundation

/// Uploads a file, or a body the test feeds, the way the page does: `POST /upload?path=…` with
/// the whole relative path percent-encoded (its slashes too), on `RawClient`'s connection.
package enum Uploader {
  /// Uploads `file` as `path` and returns the HTTP status (0 when it could not connect).
  /// `rate` limits the speed (bytes a second, with curl's suffixes: `200K`, `1M`) so an upload
  /// stays in flight.
  @discardableResult
  package static func upload(
    _ file: URL, as path: String, port: Int, rate: String? = nil
  ) async throws -> Int {
    try await status(of: start(file, as: path, port: port, rate: rate))
  }

  /// Starts an upload of `file` as `path` and returns it in flight.
  package static func start(
    _ file: URL, as path: String, port: Int, rate: String? = nil
  ) throws -> UploadInFlight {
    let bytes = [UInt8](try Data(contentsOf: file))
    return UploadInFlight(
      head: head(path, size: bytes.count, port: port), bytes: bytes,
      rate: try rate.map(bytesPerSecond), port: port, fed: false)
  }

  /// Starts an upload of `size` bytes as `path` whose body the test writes to the returned
  /// upload (`write`, then `closeInput`): it stays in flight exactly as long as the test wants.
  package static func startFed(as path: String, size: Int, port: Int) throws -> UploadInFlight {
    UploadInFlight(
      head: head(path, size: size, port: port), bytes: [], rate: nil, port: port, fed: true)
  }

  /// Waits (two minutes at most) for a started upload and returns its HTTP status (0 when it did
  /// not complete).
  package static func status(of upload: UploadInFlight) async throws -> Int {
    await upload.status(timeout: .seconds(120))
  }

  private static func head(_ path: String, size: Int, port: Int) -> String {
    let allowed = CharacterSet(
      charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
    let encoded = path.addingPercentEncoding(withAllowedCharacters: allowed) ?? path
    return Requests.uploadHead(
      port: port, encodedPath: encoded, length: size, origin: .some(nil),
      extra: ["Content-Type: application/octet-stream"])
  }

  /// `300K` → 307200 (curl's suffixes: K, M, G, powers of 1024).
  private static func bytesPerSecond(_ rate: String) throws -> Int {
    let units: [Character: Int] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30]
    let unit = rate.last.flatMap { units[Character($0.uppercased())] }
    guard let number = Int(unit == nil ? rate : String(rate.dropLast())) else {
      throw HarnessError(description: "not a rate: \(rate)")
    }
    return number * (unit ?? 1)
  }
}

import Foundation

/// Request builders for the tests.
package enum Requests {
  /// `POST /upload?path=` with the usual headers; `encodedPath` goes in as given. `origin`:
  /// left out of the call, the page's own; `.some(nil)`, none (as curl sends).
  package static func uploadHead(
    port: Int, encodedPath: String, length: Int?, host: String? = nil, origin: String?? = .none,
    extra: [String] = []
  ) -> String {
    let hostValue = host ?? "127.0.0.1:\(port)"
    var lines = ["POST /upload?path=\(encodedPath) HTTP/1.1", "Host: \(hostValue)"]
    switch origin {
    case .none: lines.append("Origin: http://\(hostValue)")
    case .some(.none): break
    case .some(.some(let value)): lines.append("Origin: \(value)")
    }
    if let length { lines.append("Content-Length: \(length)") }
    lines.append(contentsOf: extra)
    return lines.joined(separator: "\r\n") + "\r\n\r\n"
  }

  /// `path` percent-encoded segment by segment (its slashes kept).
  package static func encode(_ path: String) -> String {
    path.split(separator: "/", omittingEmptySubsequences: false).map {
      $0.addingPercentEncoding(
        withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~")))!
    }.joined(separator: "/")
  }
}

// libFuzzer target: percent-decoding and the upload path rules (scripts/fuzz.sh builds and runs
// it).

import Foundation
import Glibc

@testable import BrowserDrop

/// One fuzz input, read three ways: as a query string, as an already-decoded path, and as bytes
/// to percent-encode and decode again. Every accepted path must obey protocol v1's rules.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzUploadPath(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  let bytes = Array(UnsafeBufferPointer(start: data, count: size))
  let text = String(decoding: bytes, as: UTF8.self)

  if let path = try? UploadPath(query: Substring(text)) { checkSafe(path) }
  if let path = try? UploadPath(query: Substring("path=" + text)) { checkSafe(path) }
  if let path = try? UploadPath(validating: text) { checkSafe(path) }

  // Decoding is exactly once: every byte escaped comes back as itself (when it is UTF-8).
  let hex = Array("0123456789abcdef0123456789ABCDEF".utf8)
  var escaped = ""
  for (index, byte) in bytes.enumerated() {
    let digits = index & 1 == 0 ? 0 : 16  // both cases of hex digits
    escaped +=
      "%"
      + String(
        decoding: [hex[digits + Int(byte >> 4)], hex[digits + Int(byte & 15)]], as: UTF8.self)
  }
  let decoded = PercentDecoding.decode(Substring(escaped))
  if let valid = String(validating: bytes, as: UTF8.self) {
    check(decoded.map { Array($0.utf8) } == Array(valid.utf8), "escape round trip")
  } else {
    check(decoded == nil, "invalid UTF-8 must not decode")
  }
  if let once = PercentDecoding.decode(Substring(text)) {
    check(once.utf8.count <= text.utf8.count, "decoding never grows")
  }
  return 0
}

private func check(_ condition: Bool, _ message: String) {
  if !condition { fatalError("invariant broken: \(message)") }
}

/// What protocol v1 promises about an accepted path.
private func checkSafe(_ path: UploadPath) {
  let value = path.value
  check(!value.isEmpty, "empty path accepted")
  check(value.utf8.count <= UploadPath.maximumBytes, "path over 1024 bytes")
  check(
    Array(value.precomposedStringWithCanonicalMapping.utf8) == Array(value.utf8), "path not NFC")
  check(!value.utf8.contains(0x5C), "backslash accepted")
  check(!value.utf8.contains(0), "NUL accepted")
  for scalar in value.unicodeScalars {
    let category = scalar.properties.generalCategory
    check(category != .control && category != .format, "control or format character accepted")
  }
  check(!value.hasPrefix("/"), "absolute path accepted")
  let segments = value.utf8.split(separator: 0x2F, omittingEmptySubsequences: false)
  check(segments.count == path.segments.count, "segments disagree with the value")
  for (segment, stored) in zip(segments, path.segments) {
    check(!segment.isEmpty, "empty segment accepted")
    check(segment.first != 0x2E, "hidden, . or .. segment accepted")
    check(segment.count <= UploadPath.maximumSegmentBytes, "segment over 255 bytes")
    check(Array(segment) == Array(stored.utf8), "segment bytes disagree")
  }
  // Joined under a folder, the path stays inside it.
  let joined = URL(fileURLWithPath: "/staging/session").appending(path: value).standardized.path
  // (Bytes, not Characters: a segment may start with a combining mark that joins the slash.)
  check(joined.utf8.starts(with: "/staging/session/".utf8), "path leaves its folder: \(joined)")
}

#if BROWSERDROP_FUZZ
  // Only with BROWSERDROP_FUZZ=1 (scripts/fuzz.sh); a normal build makes an empty program.
  @_silgen_name("LLVMFuzzerRunDriver")
  func runFuzzerDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
  ) -> CInt

  var fuzzArgc = CommandLine.argc
  var fuzzArgv = CommandLine.unsafeArgv
  let fuzzStatus = runFuzzerDriver(&fuzzArgc, &fuzzArgv) { data, size in
    fuzzUploadPath(data ?? UnsafePointer(bitPattern: 1)!, size)
  }
  exit(fuzzStatus)
#endif

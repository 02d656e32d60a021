// libFuzzer target: the Host and Origin checks against DNS rebinding and cross-site uploads
// (scripts/fuzz.sh builds and runs it).

import Glibc

@testable import BrowserDrop

/// One fuzz input: the first byte says where the Host value ends and the Origin begins.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHostPolicy(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  guard size > 0 else { return 0 }
  let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
  let split = min(Int(data[0]), bytes.count)
  let host = String(decoding: bytes[..<split], as: UTF8.self)
  let origin = String(decoding: bytes[split...], as: UTF8.self)

  if HostPolicy.isAllowed(host: host) { checkPrivate(host) }
  if HostPolicy.isAllowed(host: host), HostPolicy.originMatches(origin, host: host) {
    checkSameOrigin(origin, host: host)
  }
  // The whole input as a Host, and as an Origin for the host it names.
  let whole = String(decoding: bytes, as: UTF8.self)
  if HostPolicy.isAllowed(host: whole) {
    checkPrivate(whole)
    check(HostPolicy.originMatches("http://" + whole, host: whole), "own origin refused")
    check(!HostPolicy.originMatches("https://" + whole, host: whole), "https origin accepted")
    check(!HostPolicy.originMatches("http://" + whole + ".evil.com", host: whole), "suffix")
  }
  return 0
}

private func check(_ condition: Bool, _ message: String) {
  if !condition { fatalError("invariant broken: \(message)") }
}

private let privateSuffixes = [".local", ".lan", ".home", ".home.arpa", ".internal"]

/// An allowed Host is plain ASCII naming an IP literal, localhost, a single label or a
/// private-use name, with at most a numeric port.
private func checkPrivate(_ host: String) {
  let allowedBytes = host.utf8.allSatisfy { byte in
    (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A)
      || (byte >= 0x61 && byte <= 0x7A) || byte == 0x2E || byte == 0x2D || byte == 0x5F
      || byte == 0x3A || byte == 0x5B || byte == 0x5D
  }
  check(allowedBytes, "allowed Host with a byte outside [A-Za-z0-9._:[]-]: \(Array(host.utf8))")
  let (name, port) = splitHostPort(host)
  if let port { check(!port.isEmpty && port.count <= 5 && Int(port)! <= 65535, "port") }
  if name.hasPrefix("[") {
    check(
      name.hasSuffix("]")
        && name.dropFirst().dropLast().allSatisfy { $0.isHexDigit || $0 == ":" || $0 == "." },
      "IPv6 literal")
    return
  }
  let lower = name.lowercased()
  let trimmed = lower.hasSuffix(".") ? String(lower.dropLast()) : lower
  let labels = trimmed.split(separator: ".", omittingEmptySubsequences: false)
  let isIPv4 = labels.count == 4 && labels.allSatisfy { !$0.isEmpty && $0.allSatisfy(\.isNumber) }
  check(
    isIPv4 || labels.count == 1 || trimmed == "localhost"
      || privateSuffixes.contains { trimmed.hasSuffix($0) },
    "a public name was allowed: \(host)")
}

/// An accepted Origin is `http://` and the Host's own name and port (80 when absent).
private func checkSameOrigin(_ origin: String, host: String) {
  check(origin.lowercased().hasPrefix("http://"), "origin scheme")
  let rest = String(origin.dropFirst(7))
  check(!rest.contains("/") && !rest.contains("@") && !rest.contains("?"), "origin path")
  let (originName, originPort) = splitHostPort(rest)
  let (hostName, hostPort) = splitHostPort(host)
  check(originName.lowercased() == hostName.lowercased(), "origin names another host")
  check(Int(originPort ?? "80") == Int(hostPort ?? "80"), "origin names another port")
}

private func splitHostPort(_ value: String) -> (String, String?) {
  if value.hasPrefix("["), let close = value.firstIndex(of: "]") {
    let rest = value[value.index(after: close)...]
    return (String(value[...close]), rest.isEmpty ? nil : String(rest.dropFirst()))
  }
  guard let colon = value.firstIndex(of: ":") else { return (value, nil) }
  return (String(value[..<colon]), String(value[value.index(after: colon)...]))
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
    fuzzHostPolicy(data ?? UnsafePointer(bitPattern: 1)!, size)
  }
  exit(fuzzStatus)
#endif

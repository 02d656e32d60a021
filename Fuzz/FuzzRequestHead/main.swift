// libFuzzer target: the request-head scanner and parser (scripts/fuzz.sh builds and runs it).

import Glibc

@testable import BrowserDrop

/// One fuzz input: scans for the end of a head the way a connection does (in pieces), parses
/// what it finds and checks that a parsed head agrees with its bytes.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRequestHead(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  let bytes = UnsafeRawBufferPointer(start: data, count: size)
  let fullEnd = RequestHead.end(in: bytes, scanFrom: 0)
  if let fullEnd {
    check(fullEnd >= 2 && fullEnd <= size, "end out of range")
    check(bytes[fullEnd - 1] == 0x0A, "a head must end with LF")
    let blank = bytes[fullEnd - 2] == 0x0A || (fullEnd >= 3 && bytes[fullEnd - 3] == 0x0A)
    check(blank, "a head must end with a blank line")
  }
  // The connection's way: pieces of a size taken from the first byte, scanning from 3 before.
  let piece = size > 0 ? Int(bytes[0] % 17) + 1 : 1
  var filled = 0
  var incrementalEnd: Int?
  while filled < size, incrementalEnd == nil {
    let scanFrom = max(0, filled - 3)
    filled = min(size, filled + piece)
    incrementalEnd = RequestHead.end(
      in: UnsafeRawBufferPointer(rebasing: bytes[..<filled]), scanFrom: scanFrom)
  }
  check(incrementalEnd == fullEnd, "scanning in pieces disagrees with one scan")

  let head = UnsafeRawBufferPointer(rebasing: bytes[..<(fullEnd ?? size)])
  // A refused head (431 or 400) becomes a 403 only for a foreign Host, read leniently.
  let hostFirst = RequestPolicy.hostFirst(Refusal(.badRequest), in: head)
  check([.badRequest, .forbidden].contains(hostFirst.error), "hostFirst answers 400 or 403")
  guard let parsed = try? RequestHead.parse(head) else { return 0 }
  checkConsistent(parsed, head)
  // The lenient reading finds the parsed head's one Host: an allowed one is never a 403.
  if let host = parsed.host, HostPolicy.isAllowed(host: host) {
    check(hostFirst.error == .badRequest, "hostFirst refused a head whose Host is allowed")
  }
  return 0
}

private func check(_ condition: Bool, _ message: String) {
  if !condition { fatalError("invariant broken: \(message)") }
}

/// A parsed head's fields must be what an independent reading of its lines says.
private func checkConsistent(_ head: RequestHead, _ bytes: UnsafeRawBufferPointer) {
  let all = Array(bytes)
  check(all.count >= 4 && all.suffix(4) == [13, 10, 13, 10], "a parsed head ends with CRLFCRLF")
  var lines: [[UInt8]] = []
  var current: [UInt8] = []
  for (index, byte) in all.enumerated() {
    if byte == 10 {
      check(index > 0 && all[index - 1] == 13, "a parsed head has a bare LF")
      lines.append(Array(current.dropLast()))
      current = []
    } else {
      current.append(byte)
    }
  }
  check(!lines[0].contains(13) && lines.dropFirst().allSatisfy { !$0.contains(13) }, "bare CR")
  check(!head.method.isEmpty && head.method.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }, "method")
  check(!head.target.isEmpty && head.target.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }, "target")
  let requestLine = String(decoding: lines[0], as: UTF8.self)
  check(
    requestLine == head.method + " " + head.target + " HTTP/1.1"
      || requestLine == head.method + " " + head.target + " HTTP/1.0", "request line")
  check(lines.last!.isEmpty, "last line empty")
  var hosts: [String] = []
  var lengths: [String] = []
  var origins: [String] = []
  for line in lines.dropFirst().dropLast() {
    check(!line.isEmpty && line[0] != 0x20 && line[0] != 0x09, "folded or empty header line")
    check(!line.contains { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }, "control in a header")
    guard let colon = line.firstIndex(of: 0x3A) else { fatalError("header without a colon") }
    let name = String(decoding: line[..<colon], as: UTF8.self).lowercased()
    // Optional white space is SP and HTAB bytes (RFC 9110 §5.6.3), trimmed as bytes: a space
    // followed by a combining mark is one Character, which Character-wise trimming would keep.
    var value = line[(colon + 1)...]
    while let first = value.first, first == 0x20 || first == 0x09 { value = value.dropFirst() }
    while let last = value.last, last == 0x20 || last == 0x09 { value = value.dropLast() }
    let text = String(decoding: value, as: UTF8.self)
    switch name {
    case "host": hosts.append(text)
    case "content-length": lengths.append(text)
    case "origin": origins.append(text)
    default: break
    }
  }
  check(hosts.count == 1 && head.host == hosts[0], "exactly one Host, as sent")
  check(origins.count <= 1 && head.origin == origins.first, "at most one Origin, as sent")
  check(lengths.count <= 1, "at most one Content-Length")
  if let length = lengths.first {
    check(!length.isEmpty && length.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }, "digits only")
    // Digits past what an Int holds still make a length: the largest one (weighed as too large).
    check(head.contentLength == (Int(length) ?? Int.max), "Content-Length as sent")
    check(head.contentLength! >= 0, "Content-Length not negative")
  } else {
    check(head.contentLength == nil, "no Content-Length")
  }
}

extension String {
  fileprivate func trimmingCharacters(in set: String) -> String {
    var scalars = Substring(self)
    while let first = scalars.first, set.contains(first) { scalars.removeFirst() }
    while let last = scalars.last, set.contains(last) { scalars.removeLast() }
    return String(scalars)
  }
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
    fuzzRequestHead(data ?? UnsafePointer(bitPattern: 1)!, size)
  }
  exit(fuzzStatus)
#endif

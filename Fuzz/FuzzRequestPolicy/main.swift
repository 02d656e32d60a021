// libFuzzer target: protocol v1's check order, `RequestPolicy` (scripts/fuzz.sh builds and
// runs it).

import Glibc

@testable import BrowserDrop

/// One fuzz input: the first byte picks the session's limits (bit 0: only `.txt`; bit 1: at most
/// 1000 bytes), the rest is what a client sent. Decides it the way a connection does and checks
/// the decision against the rules read one by one, and against the same head decided with the
/// limits lifted: a later check must never change an earlier answer.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRequestPolicy(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  guard size > 0 else { return 0 }
  let limits = data[0]
  let policy = RequestPolicy(
    allowedExtensions: limits & 1 != 0 ? ["txt"] : nil,
    maximumFileSize: limits & 2 != 0 ? 1000 : nil)
  let bytes = UnsafeRawBufferPointer(start: data + 1, count: size - 1)
  let decision = decide(bytes, policy)
  check(decision == decide(bytes, policy), "the same head decided twice differently")

  let head = UnsafeRawBufferPointer(
    rebasing: bytes[..<(RequestHead.end(in: bytes, scanFrom: 0) ?? bytes.count)])
  // Host first: a foreign Host anywhere the lenient reading looks is a 403, whatever else.
  if RequestHead.lenientHostValues(in: head).contains(where: { !HostPolicy.isAllowed(host: $0) }) {
    check(decision == .refuse(.foreignHost), "a foreign Host was not refused first")
  }
  // Lifting the limits changes only what they decide: a type or size refusal.
  let lifted = decide(bytes, RequestPolicy(allowedExtensions: nil, maximumFileSize: nil))
  switch decision {
  case .refuse(let refusal) where refusal.error == .unsupportedType || refusal.error == .tooLarge:
    guard case .admitUpload(let upload) = lifted else {
      fatalError("invariant broken: without limits, a type or size refusal is not an upload")
    }
    if refusal.error == .tooLarge, limits & 1 != 0 {
      check(upload.path.fileExtension == "txt", "the size was weighed before the type")
    }
  default:
    check(decision == lifted, "lifting the limits changed an earlier answer")
  }

  switch decision {
  case .refuse(let refusal):
    let codes: Set<ProtocolError> = [
      .forbidden, .headersTooLarge, .badRequest, .lengthRequired, .methodNotAllowed,
      .invalidPath, .unsupportedType, .tooLarge,
    ]
    check(codes.contains(refusal.error), "a refusal the policy can't make: \(refusal.error)")
    if head.count > RequestHead.maximumSize {
      check([.headersTooLarge, .forbidden].contains(refusal.error), "an oversized head read")
    }
  case .servePage(let path):
    let parsed = checkServed(head)
    check(parsed.method == "GET" && path != "/config.json", "a page served for another request")
    check(parsed.target.hasPrefix(path), "the page path is not the target's")
  case .serveConfiguration:
    let parsed = checkServed(head)
    check(parsed.method == "GET", "config.json served for another method")
  case .admitUpload(let upload):
    let parsed = checkServed(head)
    check(parsed.method == "POST", "an upload admitted for another method")
    check(parsed.target.hasPrefix("/upload?") || parsed.target == "/upload", "not /upload")
    check(parsed.contentLength == upload.size, "the size is not the Content-Length")
    check(parsed.expectsContinue == upload.expectsContinue, "Expect: 100-continue lost")
    if let origin = parsed.origin {
      check(HostPolicy.originMatches(origin, host: parsed.host!), "a foreign Origin admitted")
    }
    if let allowed = policy.allowedExtensions {
      check(allowed.contains(upload.path.fileExtension), "an extension not allowed admitted")
    }
    if let maximum = policy.maximumFileSize { check(upload.size <= maximum, "too large admitted") }
  }
  return 0
}

/// What a connection decides for bytes that arrived: the head through its blank line, or a head
/// that never ends within the limit.
private func decide(
  _ bytes: UnsafeRawBufferPointer, _ policy: RequestPolicy
)
  -> RequestPolicy.Decision
{
  if let end = RequestHead.end(in: bytes, scanFrom: 0) {
    return policy.decide(head: UnsafeRawBufferPointer(rebasing: bytes[..<end]))
  }
  guard bytes.count > RequestHead.maximumSize else {
    // Still arriving: a connection waits for more. Decide it as if it ended here.
    return policy.decide(head: bytes)
  }
  return .refuse(RequestPolicy.refusal(forUnfinishedHead: bytes))
}

/// A request that is served passed Host and framing: its head parses, its Host is allowed and
/// it has no Transfer-Encoding.
private func checkServed(_ head: UnsafeRawBufferPointer) -> RequestHead {
  guard let parsed = try? RequestHead.parse(head) else { fatalError("invariant broken: unparsed") }
  check(head.count <= RequestHead.maximumSize, "an oversized head served")
  check(HostPolicy.isAllowed(host: parsed.host!), "a foreign Host served")
  check(!parsed.hasTransferEncoding, "Transfer-Encoding served")
  return parsed
}

private func check(_ condition: Bool, _ message: String) {
  if !condition { fatalError("invariant broken: \(message)") }
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
    fuzzRequestPolicy(data ?? UnsafePointer(bitPattern: 1)!, size)
  }
  exit(fuzzStatus)
#endif

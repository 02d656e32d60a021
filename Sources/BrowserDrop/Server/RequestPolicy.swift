/// Protocol v1's check order, in one place: from a request head to what the connection does
/// with it. Pure (no I/O, no session state), so it is fuzzed (Fuzz/FuzzRequestPolicy) and its
/// order is tested pair by pair (RefusalOrderTests).
///
/// The order, the first that applies answering: Host, framing (431, 400, 411), method and
/// target, Origin (uploads only), path, type, size. Name conflicts and free space come after,
/// from the server actor (`Admission`), since they depend on the session.
struct RequestPolicy: Sendable {
  /// Accepted extensions, lowercased, without the dot; `nil` accepts any.
  var allowedExtensions: Set<String>?
  /// The largest accepted body, in bytes; `nil` for no limit.
  var maximumFileSize: Int?

  /// What to do with a request.
  enum Decision: Sendable, Equatable {
    /// Serve the page file at `path` (the target without its query).
    case servePage(path: String)
    /// Serve `config.json`.
    case serveConfiguration
    /// Answer with this refusal.
    case refuse(Refusal)
    /// Ask the server to admit this upload (name conflicts, free space), then receive it.
    case admitUpload(UploadRequest)
  }

  /// An upload that passed every check that does not depend on the session.
  struct UploadRequest: Sendable, Equatable {
    let path: UploadPath
    /// The announced `Content-Length`.
    let size: Int
    /// Whether the client waits for `100 Continue` before sending the body.
    let expectsContinue: Bool
  }

  /// The decision for a complete head: `bytes` runs through its blank line.
  func decide(head bytes: UnsafeRawBufferPointer) -> Decision {
    guard bytes.count <= RequestHead.maximumSize else {
      return .refuse(Self.hostFirst(Refusal(.headersTooLarge), in: bytes))
    }
    do throws(Refusal) {
      return decide(try RequestHead.parse(bytes))
    } catch {
      return .refuse(Self.hostFirst(error, in: bytes))
    }
  }

  /// The answer to a head that has grown past ``RequestHead/maximumSize`` without ending:
  /// `bytes` is what arrived.
  static func refusal(forUnfinishedHead bytes: UnsafeRawBufferPointer) -> Refusal {
    hostFirst(Refusal(.headersTooLarge), in: bytes)
  }

  /// The decision for a parsed head.
  func decide(_ head: RequestHead) -> Decision {
    guard let host = head.host, HostPolicy.isAllowed(host: host) else {
      return .refuse(.foreignHost)
    }
    if head.hasTransferEncoding {
      return .refuse(
        head.contentLength == nil
          ? Refusal(.lengthRequired)
          : Refusal(.badRequest, "Content-Length with Transfer-Encoding."))
    }
    if head.method == "POST", head.contentLength == nil { return .refuse(Refusal(.lengthRequired)) }
    let target = head.target
    let questionMark = target.firstIndex(of: "?")
    let path = questionMark.map { String(target[..<$0]) } ?? target
    switch head.method {
    case "GET":
      return path == "/config.json" ? .serveConfiguration : .servePage(path: path)
    case "POST" where path == "/upload":
      if let origin = head.origin, !HostPolicy.originMatches(origin, host: host) {
        return .refuse(Refusal(.forbidden, "Uploads must come from this server's own page."))
      }
      let query = questionMark.map { target[target.index(after: $0)...] } ?? ""
      return decideUpload(query: query, size: head.contentLength ?? 0, head: head)
    default:
      return .refuse(Refusal(.methodNotAllowed))
    }
  }

  private func decideUpload(query: Substring, size: Int, head: RequestHead) -> Decision {
    let path: UploadPath
    do throws(Refusal) {
      path = try UploadPath(query: query)
    } catch {
      return .refuse(error)
    }
    if let allowedExtensions, !allowedExtensions.contains(path.fileExtension) {
      return .refuse(
        Refusal(
          .unsupportedType,
          path.fileExtension.isEmpty
            ? "Files without an extension aren't accepted."
            : "Files of type .\(path.fileExtension) aren't accepted."))
    }
    if let maximumFileSize, size > maximumFileSize {
      return .refuse(
        Refusal(.tooLarge, "The file is \(size) bytes; the largest accepted is \(maximumFileSize).")
      )
    }
    return .admitUpload(
      UploadRequest(path: path, size: size, expectsContinue: head.expectsContinue))
  }

  /// Host is decided before framing: a head refused as too large or unreadable (`refusal`) is
  /// answered 403 instead when a Host header in it names no private address, so that a request
  /// for a foreign name never learns more than that. A head with no Host, or only allowed ones,
  /// keeps its refusal.
  static func hostFirst(_ refusal: Refusal, in bytes: UnsafeRawBufferPointer) -> Refusal {
    let foreign = RequestHead.lenientHostValues(in: bytes).contains {
      !HostPolicy.isAllowed(host: $0)
    }
    return foreign ? .foreignHost : refusal
  }
}

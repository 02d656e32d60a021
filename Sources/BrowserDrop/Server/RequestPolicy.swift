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
  /// Whether the resumable extension is on: `upload=` ids, `HEAD` and `PATCH /upload`. Off,
  /// those methods get 405 and an id in a POST's query is ignored, as protocol v1 has it.
  var resumable = false

  /// What to do with a request.
  enum Decision: Sendable, Equatable {
    /// Serve the page file at `path` (the target without its query).
    case servePage(path: String)
    /// Serve `config.json`.
    case serveConfiguration
    /// Answer with this refusal.
    case refuse(Refusal)
    /// Ask the server to admit this upload (name conflicts, free space), then receive it; or,
    /// for a resumable upload's `HEAD`, ask where it stands.
    case admitUpload(UploadRequest)
  }

  /// An upload that passed every check that does not depend on the session.
  struct UploadRequest: Sendable, Equatable {
    let path: UploadPath
    /// The announced `Content-Length`.
    let size: Int
    /// Whether the client waits for `100 Continue` before sending the body.
    let expectsContinue: Bool
    /// What the resumable extension asks: `nil` for a plain protocol v1 upload.
    var resumable: ResumableRequest? = nil
  }

  /// A request of the resumable extension (README, "Resumable uploads").
  enum ResumableRequest: Sendable, Equatable {
    /// `POST` with `upload=ID`: a new upload, kept when it is cut off.
    case start(UploadID)
    /// `PATCH` with `Upload-Offset`: the rest of the upload, from `offset`; `size` is the
    /// body (what remains).
    case resume(UploadID, offset: Int)
    /// `HEAD`: where the upload stands.
    case probe(UploadID)
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
    let sendsBody = head.method == "POST" || (resumable && head.method == "PATCH")
    if sendsBody, head.contentLength == nil { return .refuse(Refusal(.lengthRequired)) }
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
    case "HEAD" where resumable && path == "/upload", "PATCH" where resumable && path == "/upload":
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
    let resumption: ResumableRequest?
    do throws(Refusal) {
      path = try UploadPath(query: query)
      resumption = try resumable ? Self.resumption(query: query, head: head) : nil
    } catch {
      return .refuse(error)
    }
    if case .probe = resumption {
      return .admitUpload(
        UploadRequest(path: path, size: 0, expectsContinue: false, resumable: resumption))
    }
    // A PATCH is weighed as the whole file it completes: what is on the disk plus its body.
    var total = size
    if case .resume(_, let offset) = resumption {
      let (sum, overflow) = size.addingReportingOverflow(offset)
      total = overflow ? Int.max : sum
    }
    if let allowedExtensions, !allowedExtensions.contains(path.fileExtension) {
      return .refuse(
        Refusal(
          .unsupportedType,
          path.fileExtension.isEmpty
            ? "Files without an extension aren't accepted."
            : "Files of type .\(path.fileExtension) aren't accepted."))
    }
    if let maximumFileSize, total > maximumFileSize {
      return .refuse(
        Refusal(
          .tooLarge, "The file is \(total) bytes; the largest accepted is \(maximumFileSize).")
      )
    }
    return .admitUpload(
      UploadRequest(
        path: path, size: size, expectsContinue: head.expectsContinue, resumable: resumption))
  }

  /// The resumable part of an upload request: the id (required for HEAD and PATCH, optional
  /// for POST) and, for PATCH, `Upload-Offset`.
  private static func resumption(
    query: Substring, head: RequestHead
  ) throws(Refusal) -> ResumableRequest? {
    let id = try UploadID.find(inQuery: query)
    switch head.method {
    case "POST":
      return id.map { .start($0) }
    case "HEAD":
      guard let id else { throw Refusal(.invalidUploadID, "The upload id is missing.") }
      return .probe(id)
    default:
      guard let id else { throw Refusal(.invalidUploadID, "The upload id is missing.") }
      guard let offset = head.uploadOffset else {
        throw Refusal(.badRequest, "A PATCH needs an Upload-Offset header.")
      }
      return .resume(id, offset: offset)
    }
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

/// Protocol version 1's error table: every refusal the server sends names one of these.
enum ProtocolError: String, Error, Sendable, CaseIterable {
  case badRequest = "bad_request"
  case invalidPath = "invalid_path"
  case unsupportedType = "unsupported_type"
  case forbidden = "forbidden"
  case notFound = "not_found"
  case methodNotAllowed = "method_not_allowed"
  case pathConflict = "path_conflict"
  case lengthRequired = "length_required"
  case tooLarge = "too_large"
  case headersTooLarge = "headers_too_large"
  case writeFailed = "write_failed"
  case pageMissing = "page_missing"
  case insufficientStorage = "insufficient_storage"
  // The resumable-uploads extension (README, "Resumable uploads").
  case invalidUploadID = "invalid_upload_id"
  case unknownUpload = "unknown_upload"
  case offsetMismatch = "offset_mismatch"
  case uploadMismatch = "upload_mismatch"

  /// The HTTP status code.
  var status: Int {
    switch self {
    case .badRequest, .invalidPath, .unsupportedType, .invalidUploadID: 400
    case .forbidden: 403
    case .notFound, .unknownUpload: 404
    case .methodNotAllowed: 405
    case .pathConflict, .offsetMismatch, .uploadMismatch: 409
    case .lengthRequired: 411
    case .tooLarge: 413
    case .headersTooLarge: 431
    case .writeFailed, .pageMissing: 500
    case .insufficientStorage: 507
    }
  }

  /// The default English message.
  var message: String {
    switch self {
    case .badRequest: "The request couldn't be read."
    case .invalidPath: "The path is missing or unsafe."
    case .unsupportedType: "The file type isn't accepted."
    case .forbidden: "Not from the server's own page."
    case .notFound: "No such page file."
    case .methodNotAllowed: "Only GET of the page and POST /upload are supported."
    case .pathConflict: "Another file or folder in the session already has that name."
    case .lengthRequired: "Content-Length is required and chunked bodies aren't accepted."
    case .tooLarge: "The file is larger than the largest accepted size."
    case .headersTooLarge: "The request head is over 16 KiB."
    case .writeFailed: "The file couldn't be written."
    case .pageMissing: "The upload page isn't packaged with the server."
    case .insufficientStorage: "Not enough free space on the device."
    case .invalidUploadID:
      "The upload id must be 128 bits in URL-safe base64 (22 characters) or hex."
    case .unknownUpload: "No resumable upload has that id (never started, finished or expired)."
    case .offsetMismatch:
      "Upload-Offset isn't where the upload stands; see the Upload-Offset header."
    case .uploadMismatch: "The request doesn't match the upload that id names (path or length)."
    }
  }
}

/// A refusal: an error code and the message sent with it.
struct Refusal: Error, Sendable, Equatable {
  let error: ProtocolError
  let message: String
  /// Where a resumable upload stands, sent as `Upload-Offset` / `Upload-Length` with the
  /// refusal (a 409 says where to continue from).
  var uploadOffset: Int?
  var uploadLength: Int?
  /// The refusal of the upload's last request, sent as `Upload-Refusal` with a `HEAD`'s answer
  /// (`RecentRefusals`).
  var refusedBefore: ProtocolError?

  init(_ error: ProtocolError, _ message: String? = nil) {
    self.error = error
    self.message = message ?? error.message
  }
}

import FoundationEssentials
import Glibc

extension Error {
  /// The sentence Foundation's `localizedDescription` gives for this error on Linux, which
  /// FoundationEssentials lacks: "The operation could not be completed. " and Foundation's reason
  /// for a `CocoaError` (what `FileManager` throws), `strerror` for a `POSIXError`, or the error's
  /// domain and code for the rest.
  package var operationFailureText: String {
    let prefix = "The operation could not be completed. "
    if let code = (self as? CocoaError)?.code.rawValue {
      return prefix + (cocoaReasons[code] ?? "(NSCocoaErrorDomain error \(code).)")
    }
    if let error = self as? POSIXError {
      return prefix + String(cString: strerror(error.code.rawValue))
    }
    return prefix + "(\(_domain) error \(_code).)"
  }
}

/// Foundation's reasons for the `CocoaError` codes the file-system and JSON calls we make can
/// raise; any other code is named by number, as Foundation does for codes it has no reason for.
private let cocoaReasons: [Int: String] = [
  4: "The file doesn’t exist.",
  255: "The file couldn’t be locked.",
  257: "You don’t have permission.",
  260: "The file doesn’t exist.",
  513: "You don’t have permission.",
  514: "The file name is invalid.",
  516: "A file with the same name already exists.",
  640: "There isn’t enough space.",
  642: "The volume is read only.",
  3840: "The data is not in the correct format.",
  4864: "The data isn’t in the correct format.",
]

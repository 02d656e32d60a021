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

/// Foundation's reasons for the `CocoaError` codes it has one for.
private let cocoaReasons: [Int: String] = [
  4: "The file doesn’t exist.",
  255: "The file couldn’t be locked.",
  257: "You don’t have permission.",
  258: "The file name is invalid.",
  259: "The file isn’t in the correct format.",
  260: "The file doesn’t exist.",
  261: "The specified text encoding isn’t applicable.",
  262: "The specified URL type isn’t supported.",
  263: "The item is too large.",
  264: "The text encoding of the contents couldn’t be determined.",
  513: "You don’t have permission.",
  514: "The file name is invalid.",
  516: "A file with the same name already exists.",
  517: "The specified text encoding isn’t applicable.",
  518: "The specified URL type isn’t supported.",
  640: "There isn’t enough space.",
  642: "The volume is read only.",
  1024: "The value is invalid.",
  2048: "The value is invalid.",
  3072: "The operation was cancelled.",
  3328: "The requested operation is not supported.",
  3840: "The data is not in the correct format.",
  3841: "The data is in a format that this application doesn’t understand.",
  3842: "An error occurred in the source of the data.",
  3851: "An error occurred in the destination for the data.",
  3852: "An error occurred in the content of the data.",
  4353: "The file is not available on iCloud yet.",
  4354: "There isn’t enough space in your account.",
  4355: "The iCloud servers might be unreachable or your settings might be incorrect.",
  4864: "The data isn’t in the correct format.",
  4865: "The data is missing.",
  4866: "The data isn’t in the correct format.",
]

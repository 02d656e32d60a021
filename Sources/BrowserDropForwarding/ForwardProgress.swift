/// How far a delivery has got, in files and bytes.
public struct ForwardProgress: Sendable, Equatable {
  /// Files delivered so far, including those found delivered by an earlier, interrupted run.
  public var completedFiles: Int
  /// Files in the folder being forwarded.
  public var totalFiles: Int
  /// Bytes delivered so far.
  public var completedBytes: Int64
  /// Bytes in the folder being forwarded.
  public var totalBytes: Int64
  /// The file being sent, relative to the folder, when one is.
  public var currentFile: String?

  /// A progress value.
  public init(
    completedFiles: Int, totalFiles: Int, completedBytes: Int64, totalBytes: Int64,
    currentFile: String? = nil
  ) {
    self.completedFiles = completedFiles
    self.totalFiles = totalFiles
    self.completedBytes = completedBytes
    self.totalBytes = totalBytes
    self.currentFile = currentFile
  }

  /// `completedBytes / totalBytes`, 1 for an empty folder.
  public var fractionCompleted: Double {
    totalBytes == 0 ? 1 : Double(completedBytes) / Double(totalBytes)
  }
}

/// One element of ``Forwarder/deliver(folder:to:policy:verify:)``'s stream.
public enum ForwardEvent: Sendable, Equatable {
  /// Bytes or files arrived.
  case progress(ForwardProgress)
  /// Everything arrived and was checked; the source folder is gone. Always the last element.
  case finished(ForwardReport)
}

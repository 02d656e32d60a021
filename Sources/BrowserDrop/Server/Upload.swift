/// An upload the server has started to receive.
public struct Upload: Sendable, Hashable {
  /// A number unique within the session, telling apart two uploads of the same path.
  public let id: UInt64
  /// The cleaned relative path, `/`-separated, for example `Book/01.mp3`.
  public let relativePath: String
  /// The size the client announced in `Content-Length`, in bytes.
  public let size: Int

  /// Creates an upload description.
  public init(id: UInt64, relativePath: String, size: Int) {
    self.id = id
    self.relativePath = relativePath
    self.size = size
  }
}

/// How far one upload in flight has come.
public struct UploadProgress: Sendable, Hashable {
  /// The upload.
  public let upload: Upload
  /// How many bytes of its body have arrived.
  public let receivedBytes: Int

  /// Creates a progress entry.
  public init(upload: Upload, receivedBytes: Int) {
    self.upload = upload
    self.receivedBytes = receivedBytes
  }
}

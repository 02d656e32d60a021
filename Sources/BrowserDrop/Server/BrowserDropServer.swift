public import Foundation

/// One upload session: an HTTP server that serves the upload page and stores what arrives in a
/// staging folder until the host takes it with `finish()` or drops it with `cancel()`.
public actor BrowserDropServer {
  /// The configuration the session was created with.
  public nonisolated let configuration: Configuration
  /// Everything that happens in the session, in order, never dropped. Read it with one consumer.
  public nonisolated let events: AsyncStream<Event>
  /// The uploads in flight with their progress; only the newest list is kept for a slow reader.
  public nonisolated let progress: AsyncStream<[UploadProgress]>

  private let eventSink: AsyncStream<Event>.Continuation
  private let progressSink: AsyncStream<[UploadProgress]>.Continuation

  /// Creates a session; nothing listens until `start()`.
  public init(configuration: Configuration = Configuration()) {
    self.configuration = configuration
    (events, eventSink) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
    (progress, progressSink) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
  }
}

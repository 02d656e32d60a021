/// Where a finished folder is delivered: a ``LocalDestination`` or an ``SMBDestination``.
///
/// Describing a destination (`description`) never includes a password, so it is safe to log.
/// The library supplies both conforming types; `Forwarder` rejects other conformances with a
/// ``ForwardFailure``.
public protocol Destination: Sendable, CustomStringConvertible {}

/// What the forwarder needs from a destination: a fresh connection for one delivery.
protocol DestinationBackend: Destination {
  /// Opens the destination for one delivery; the result is closed when the delivery ends.
  func open() async throws -> any DestinationFileSystem
  /// A stable identity for the manifest: the address without credentials.
  var manifestIdentity: String { get }
}

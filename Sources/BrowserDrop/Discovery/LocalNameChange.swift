/// What happened to the session's local name (`BrowserDropServer.localNameChanges`).
public enum LocalNameChange: Sendable, Hashable {
  /// avahi-daemon confirmed the name: `name.hostName` resolves to the session's addresses, and
  /// the service "BrowserDrop on NAME" (`_http._tcp`) is on the network. The page shows it.
  case published(LocalName)
  /// Another machine holds the name; Avahi's alternative (`intake-2`) is tried next.
  case renamed(LocalName)
  /// Nothing is published; the sentence says why (avahi-daemon is not running, for one). The
  /// session goes on by address.
  case unavailable(String)
}

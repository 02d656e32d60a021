extension BrowserDropServer {
  /// What happens to `Configuration.localName` while the session lasts: `.published` once
  /// avahi-daemon confirms the name (about a second after listening), `.renamed` when another
  /// machine holds it and Avahi's alternative (`intake-2`) is tried, `.unavailable` with a
  /// sentence when nothing can be published (avahi-daemon not running, for one).
  ///
  /// A session that takes over the advertisement of an earlier one (same name, same port,
  /// started within a few seconds, as a kiosk's next batch) hears the latest news first. The
  /// newest 64 are kept for a slow reader. Finishes when the session ends; empty when no name
  /// is set.
  public nonisolated var localNameChanges: AsyncStream<LocalNameChange> {
    localNamePublication.changes
  }

  /// The local name avahi-daemon publishes for this session now, as `config.json` gives it to
  /// the page; `nil` before it is confirmed, while a conflict is resolved, while avahi-daemon
  /// is away, and after the session ends.
  public nonisolated var publishedLocalName: LocalName? {
    localNamePublication.nameInUse
  }
}

import Synchronization

/// One session's part in publishing `Configuration.localName`: it holds the process's
/// advertisement for the name and port while the session lasts, knows the name in use (for
/// `config.json`) and passes the advertiser's news to `localNameChanges`.
///
/// `begin`, `update` and `end` are called by the server actor, one at a time; the name in use
/// is read by connections on any thread.
final class LocalNamePublication: Sendable {
  /// The name asked for; `nil` publishes nothing and loads nothing.
  let name: LocalName?
  /// The session's news of the name: the latest one first when the session takes over an
  /// advertisement; finished when the session ends (at once when there is no name).
  let changes: AsyncStream<LocalNameChange>
  private let sink: AsyncStream<LocalNameChange>.Continuation
  private let holder: UInt64

  private struct State {
    var key: LocalNameLeases<LocalNameAdvertisement>.Key?
    var advertisement: LocalNameAdvertisement?
    var inUse: LocalName?
    var ended = false
  }

  private let state = Mutex(State())

  /// Every advertisement of the process, by name and port (see `LocalNameLeases`).
  private static let leases = Mutex(LocalNameLeases<LocalNameAdvertisement>())
  private static let holders = Atomic<UInt64>(0)

  /// A publication of `name`; nothing happens before ``begin(port:addresses:)``.
  init(name: LocalName?) {
    self.name = name
    holder = Self.holders.add(1, ordering: .relaxed).newValue
    (changes, sink) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(64))
    if name == nil { sink.finish() }
  }

  deinit {
    // A server dropped without `finish()` or `cancel()` still gives its hold back.
    if let key = state.withLock({ $0.ended ? nil : $0.key }) {
      Self.release(key, holder: holder, clock: SystemSessionClock())
    }
  }

  /// The name avahi-daemon confirmed and still publishes, `nil` before, after a conflict
  /// until the alternative is confirmed, and while avahi-daemon is away.
  var nameInUse: LocalName? { state.withLock { $0.inUse } }

  /// The session listens on `port` at `addresses`: it takes the advertisement for the name and
  /// port, or starts one. Again after `resume()`, it only passes the addresses on.
  func begin(port: Int, addresses: [Address]) {
    guard let name else { return }
    let key = LocalNameLeases<LocalNameAdvertisement>.Key(label: name.label, port: port)
    let (ended, held) = state.withLock { ($0.ended, $0.advertisement) }
    guard !ended else { return }
    if let held {
      held.advertiser.update(addresses)
      return
    }
    let (advertisement, reused) = Self.leases.withLock { leases in
      leases.take(key, holder: holder) {
        let relay = LocalNameRelay()
        let advertiser = AvahiAdvertiser(
          name: name.label, port: port, addresses: addresses
        ) { relay.deliver($0) }
        return LocalNameAdvertisement(relay: relay, advertiser: advertiser)
      }
    }
    state.withLock { state in
      state.key = key
      state.advertisement = advertisement
    }
    if reused { advertisement.advertiser.update(addresses) }
    advertisement.relay.attach(holder) { [weak self] change in self?.receive(change) }
  }

  /// The server's addresses changed: the records follow.
  func update(_ addresses: [Address]) {
    state.withLock { $0.advertisement }?.advertiser.update(addresses)
  }

  /// The session ended: its news stops, and the advertisement stays for the next session on
  /// the same port for `LocalNameLeases.handOverTime` (on `clock`), then is withdrawn.
  func end(clock: any SessionClock) {
    let (key, advertisement) = state.withLock { state in
      defer {
        state.ended = true
        state.inUse = nil
        state.advertisement = nil
      }
      return (state.ended ? nil : state.key, state.advertisement)
    }
    sink.finish()
    advertisement?.relay.detach(holder)
    if let key { Self.release(key, holder: holder, clock: clock) }
  }

  private func receive(_ change: LocalNameChange) {
    let ended = state.withLock { state in
      guard !state.ended else { return true }
      if case .published(let name) = change { state.inUse = name } else { state.inUse = nil }
      return false
    }
    if !ended { sink.yield(change) }
  }

  private static func release(
    _ key: LocalNameLeases<LocalNameAdvertisement>.Key, holder: UInt64, clock: any SessionClock
  ) {
    guard let generation = leases.withLock({ $0.release(key, holder: holder) }) else { return }
    Task {
      try? await clock.sleep(for: LocalNameLeases<LocalNameAdvertisement>.handOverTime)
      leases.withLock { $0.expire(key, generation: generation) }?.advertiser.stop()
    }
  }

  /// Whether the process still has an advertisement for `name` on `port` (tests).
  static func isAdvertising(_ name: LocalName, port: Int) -> Bool {
    leases.withLock { $0.contains(.init(label: name.label, port: port)) }
  }
}

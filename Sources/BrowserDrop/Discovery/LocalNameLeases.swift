/// Which advertisement of a local name each session of the process holds, and when one that no
/// session holds any more is stopped. Pure: the caller makes and stops the advertisements.
///
/// A kiosk runs one session per batch and starts the next as soon as the last one ends. Were
/// each session to publish its name afresh, the name would be withdrawn (mDNS goodbye packets
/// flush every cache) and probed again for about a second between batches, and a name that
/// moved to `intake-2` would start over at `intake` and collide again. So an advertisement
/// outlives its session by ``handOverTime``: a session for the same name and port that starts
/// meanwhile takes it over as it is.
struct LocalNameLeases<Advertisement> {
  /// An advertisement is shared by sessions with the same name on the same port.
  struct Key: Hashable, Sendable {
    var label: String
    var port: Int
  }

  /// How long an advertisement no session holds stays published.
  static var handOverTime: Duration { .seconds(5) }

  private struct Entry {
    let advertisement: Advertisement
    var holders: Set<UInt64>
    /// Bumped at every release that leaves no holder: only the newest expiry may stop it.
    var generation: UInt64
  }

  private var entries: [Key: Entry] = [:]

  /// Whether an advertisement exists for `key`.
  func contains(_ key: Key) -> Bool { entries[key] != nil }

  /// The advertisement for `key`, now held by `holder` too: the one that exists, or a new one
  /// from `make`. `reused` says which.
  mutating func take(
    _ key: Key, holder: UInt64, make: () -> Advertisement
  ) -> (advertisement: Advertisement, reused: Bool) {
    if var entry = entries[key] {
      entry.holders.insert(holder)
      entries[key] = entry
      return (entry.advertisement, true)
    }
    let advertisement = make()
    entries[key] = Entry(advertisement: advertisement, holders: [holder], generation: 0)
    return (advertisement, false)
  }

  /// `holder` is done with `key`'s advertisement. When nobody holds it any more, returns the
  /// generation to pass to ``expire(_:generation:)`` once ``handOverTime`` has passed.
  mutating func release(_ key: Key, holder: UInt64) -> UInt64? {
    guard var entry = entries[key], entry.holders.remove(holder) != nil else { return nil }
    defer { entries[key] = entry }
    guard entry.holders.isEmpty else { return nil }
    entry.generation += 1
    return entry.generation
  }

  /// The hand-over time after a release has passed: returns the advertisement to stop, unless
  /// a session took it over meanwhile (or released it again, which starts a newer wait).
  mutating func expire(_ key: Key, generation: UInt64) -> Advertisement? {
    guard let entry = entries[key], entry.holders.isEmpty, entry.generation == generation else {
      return nil
    }
    entries[key] = nil
    return entry.advertisement
  }
}

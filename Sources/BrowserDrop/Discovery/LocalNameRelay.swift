import Synchronization

/// Passes one advertisement's news to the sessions that hold it, and the latest of it to a
/// session that takes the advertisement over, so every holder sees the same sequence.
///
/// Holders' sinks run under the relay's lock, so a replay and a new change never swap places;
/// a sink only records the change and yields it to a stream, and never calls back in here or
/// into the advertiser.
final class LocalNameRelay: Sendable {
  private struct State {
    var latest: LocalNameChange?
    var sinks: [UInt64: @Sendable (LocalNameChange) -> Void] = [:]
  }

  private let state = Mutex(State())

  /// News from the advertiser (its thread, or whoever called into it).
  func deliver(_ change: LocalNameChange) {
    state.withLock { state in
      state.latest = change
      for sink in state.sinks.values { sink(change) }
    }
  }

  /// `holder` hears every change from now on, the latest one first.
  func attach(_ holder: UInt64, sink: @escaping @Sendable (LocalNameChange) -> Void) {
    state.withLock { state in
      state.sinks[holder] = sink
      if let latest = state.latest { sink(latest) }
    }
  }

  /// `holder` hears nothing more.
  func detach(_ holder: UInt64) {
    _ = state.withLock { $0.sinks.removeValue(forKey: holder) }
  }
}

/// One advertisement of a local name in the process: Avahi's publisher and its relay.
struct LocalNameAdvertisement: Sendable {
  let relay: LocalNameRelay
  let advertiser: AvahiAdvertiser
}

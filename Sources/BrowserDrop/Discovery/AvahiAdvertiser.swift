import BrowserDropSystem
import CAvahiLoader
import Glibc
import Synchronization

/// `Configuration.localName`: `NAME.local` (A and AAAA records for the addresses the server
/// shows, without link-local ones) and an `_http._tcp` service "BrowserDrop on NAME", published
/// through avahi-daemon with Avahi's client library.
///
/// libavahi-client is opened with dlopen only here (see Package.swift). Its event loop runs on a
/// thread of its own (`bd-avahi`), which also makes the D-Bus connection, so nothing waits on
/// the daemon from the cooperative pool or the server's loop. A name another machine holds is
/// followed to Avahi's alternative (`NAME-2`), and the records follow the address list.
final class AvahiAdvertiser: Sendable {
  private final class Context: Sendable {
    let notify: @Sendable (LocalNameChange) -> Void
    init(notify: @escaping @Sendable (LocalNameChange) -> Void) { self.notify = notify }
  }

  /// The C publisher: `@unchecked Sendable` as its functions take its own lock, from any thread.
  private struct Publisher: @unchecked Sendable {
    let pointer: OpaquePointer
  }

  private struct State {
    var publisher: Publisher?
    var addresses: [String] = []
    var stopped = false
  }

  private let state = Mutex(State())
  private let name: String

  /// Starts publishing `name` for `port` at `addresses`; `notify` runs on the advertiser's
  /// thread (or the caller of ``update(_:)``, or this initializer when no thread can be made)
  /// and must not block.
  init(
    name: String, port: Int, addresses: [Address],
    notify: @escaping @Sendable (LocalNameChange) -> Void
  ) {
    self.name = name
    state.withLock { $0.addresses = Self.publishable(addresses) }
    let context = Unmanaged.passRetained(Context(notify: notify)).toOpaque()
    let contextBits = UInt(bitPattern: context)
    do {
      try SystemThread.start(name: "bd-avahi") { [self] in
        run(port: port, context: UnsafeMutableRawPointer(bitPattern: contextBits)!)
      }
    } catch {
      Unmanaged<Context>.fromOpaque(context).release()
      notify(.unavailable("Can't advertise \(name).local: no thread for it (\(error.reason))."))
    }
  }

  /// The records follow a new address list.
  func update(_ addresses: [Address]) {
    let list = Self.publishable(addresses)
    state.withLock { state in
      guard state.addresses != list else { return }
      state.addresses = list
      if let publisher = state.publisher { Self.set(list, on: publisher.pointer) }
    }
  }

  /// Withdraws the records and ends the thread.
  func stop() {
    state.withLock { state in
      state.stopped = true
      if let publisher = state.publisher { cbd_avahi_publisher_stop(publisher.pointer) }
    }
  }

  private func run(port: Int, context: UnsafeMutableRawPointer) {
    let box = Unmanaged<Context>.fromOpaque(context)
    defer { box.release() }
    let notify = box.takeUnretainedValue().notify
    var error = [CChar](repeating: 0, count: 256)
    guard cbd_avahi_load(&error, error.count) == 0 else {
      notify(
        .unavailable(
          "Can't advertise \(name).local: libavahi-client can't be loaded (\(Self.text(error)));"
            + " install libavahi-client3. The addresses work as before."))
      return
    }
    guard
      let publisher = cbd_avahi_publisher_new(
        name, UInt16(clamping: port), Self.dispatch, context, &error, error.count)
    else {
      notify(
        .unavailable(
          "avahi-daemon isn't running (\(Self.text(error))), so \(name).local isn't advertised;"
            + " the addresses work as before."))
      return
    }
    let handle = Publisher(pointer: publisher)
    let stopped = state.withLock { state in
      state.publisher = handle
      if !state.addresses.isEmpty { Self.set(state.addresses, on: publisher) }
      return state.stopped
    }
    if stopped { cbd_avahi_publisher_stop(publisher) }
    cbd_avahi_publisher_run(publisher)
    // Forgotten under the lock before it is freed: `update` and `stop` call it under that lock.
    state.withLock { $0.publisher = nil }
    cbd_avahi_publisher_free(publisher)
  }

  /// The publisher's one callback, for every event.
  private static let dispatch: cbd_avahi_callback = { context, event, name, message in
    guard let context else { return }
    let notify = Unmanaged<Context>.fromOpaque(context).takeUnretainedValue().notify
    let label = name.map { String(cString: $0) } ?? "?"
    switch event {
    case Int32(CBD_AVAHI_ESTABLISHED.rawValue): notify(.published(LocalName(avahiLabel: label)))
    case Int32(CBD_AVAHI_RENAMED.rawValue): notify(.renamed(LocalName(avahiLabel: label)))
    default:
      let reason = message.map { String(cString: $0) } ?? "?"
      notify(
        .unavailable(
          "avahi-daemon stopped advertising \(label).local (\(reason)); it is advertised again"
            + " when avahi-daemon is back."))
    }
  }

  private static func set(_ addresses: [String], on publisher: OpaquePointer) {
    var pointers = addresses.map { strdup($0) }
    defer { pointers.forEach { free($0) } }
    pointers.withUnsafeMutableBufferPointer { buffer in
      buffer.withMemoryRebound(to: UnsafePointer<CChar>?.self) { list in
        cbd_avahi_publisher_set_addresses(publisher, list.baseAddress, list.count)
      }
    }
  }

  /// The addresses worth a record: IP literals the server shows, without loopback and
  /// link-local ones (a phone can't use those) and without names.
  static func publishable(_ addresses: [Address]) -> [String] {
    var seen = Set<String>()
    return addresses.map(\.host).filter { host in
      let lower = host.lowercased()
      var v4 = in_addr()
      var v6 = in6_addr()
      let isV4 = inet_pton(AF_INET, lower, &v4) == 1
      let isV6 = inet_pton(AF_INET6, lower, &v6) == 1
      guard isV4 || isV6 else { return false }
      if isV4, lower.hasPrefix("127.") || lower.hasPrefix("169.254.") { return false }
      if isV6,
        lower == "::1" || lower.hasPrefix("fe8") || lower.hasPrefix("fe9")
          || lower.hasPrefix("fea") || lower.hasPrefix("feb")
      {
        return false
      }
      return seen.insert(lower).inserted
    }
  }

  private static func text(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }
}

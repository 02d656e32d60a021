#ifndef C_AVAHI_LOADER_H
#define C_AVAHI_LOADER_H

#include <stddef.h>
#include <stdint.h>

/* Only the declarations of libavahi-client-dev are used: libavahi-client (and libavahi-common,
   libdbus-1) are opened with dlopen when Configuration.localName (--name) asks for an mDNS name,
   so a process without one never maps them (see Package.swift). */
#if __has_include(<avahi-client/publish.h>)
#include <avahi-client/client.h>
#include <avahi-client/publish.h>
#include <avahi-common/alternative.h>
#include <avahi-common/error.h>
#include <avahi-common/malloc.h>
#include <avahi-common/simple-watch.h>
#else
#error "avahi-client/publish.h not found: install the Debian package libavahi-client-dev (scripts/setup.sh)"
#endif

/// Opens libavahi-common.so.3 and libavahi-client.so.3 and resolves what the publisher calls.
/// 0 on success; otherwise -1 with the loader's reason in `error`. Thread-safe; what loaded stays.
int cbd_avahi_load(char *error, size_t error_size);

/// Avahi's alternative to the label `name` after a conflict ("intake" -> "intake-2" -> "intake-3"),
/// written to `out`. 0 on success; -1 when the library is not loaded or `out` is too small.
int cbd_avahi_alternative_host_name(const char *name, char *out, size_t out_size);

/// What a publisher tells its owner, from the thread that runs it.
enum cbd_avahi_event {
  /// The records are established under `name` (NAME.local and the service).
  CBD_AVAHI_ESTABLISHED = 0,
  /// `NAME.local` was taken by another machine; now trying `name` (Avahi's alternative, -2).
  CBD_AVAHI_RENAMED = 1,
  /// avahi-daemon can't be reached or refused the records; `message` says why. The publisher
  /// stops publishing (and, when the daemon is gone, says so once).
  CBD_AVAHI_FAILED = 2,
};

typedef void (*cbd_avahi_callback)(void *context, int event, const char *name, const char *message);

typedef struct cbd_avahi_publisher cbd_avahi_publisher;

/// A publisher of `name`.local (A/AAAA records, no reverse entries) and an `_http._tcp` service
/// "BrowserDrop on NAME" on `port`, through avahi-daemon. Connects to the daemon now: NULL, with
/// avahi's reason in `error` (e.g. "Daemon not running"), when it can't. Needs cbd_avahi_load.
cbd_avahi_publisher *cbd_avahi_publisher_new(
    const char *name, uint16_t port, cbd_avahi_callback callback, void *context, char *error,
    size_t error_size);

/// Runs the publisher's event loop on the calling thread until cbd_avahi_publisher_stop.
void cbd_avahi_publisher_run(cbd_avahi_publisher *publisher);

/// Frees a publisher whose loop has returned: its records are withdrawn. No other function may
/// be called on it afterwards, nor while this runs.
void cbd_avahi_publisher_free(cbd_avahi_publisher *publisher);

/// Replaces the addresses published for NAME.local (IPv4 or IPv6 text, `count` of them) and
/// publishes again. Any thread.
void cbd_avahi_publisher_set_addresses(
    cbd_avahi_publisher *publisher, const char *const *addresses, size_t count);

/// Makes cbd_avahi_publisher_run return. Any thread.
void cbd_avahi_publisher_stop(cbd_avahi_publisher *publisher);

#endif

#ifndef C_SYSTEMD_LOADER_H
#define C_SYSTEMD_LOADER_H

#include <stddef.h>
#include <stdint.h>

/* Only the declarations of libsystemd-dev are used: libsystemd is opened with dlopen when the
   command runs under systemd's notify protocol (NOTIFY_SOCKET is set), so a browserdrop started
   by hand never maps it, nor the compression and crypto libraries it needs (see Package.swift). */
#if __has_include(<systemd/sd-daemon.h>)
#include <systemd/sd-daemon.h>
#else
#error "systemd/sd-daemon.h not found: install the Debian package libsystemd-dev (scripts/setup.sh)"
#endif

/// Opens `library` (normally "libsystemd.so.0") with dlopen(RTLD_NOW | RTLD_LOCAL) and resolves
/// sd_notify and sd_watchdog_enabled. Returns 0 when both were found; otherwise -1, with the
/// dynamic loader's reason written to `error` (NUL-terminated, cut to `error_size` bytes).
/// Thread-safe; the first library that loads stays for the life of the process.
int cbd_sd_load(const char *library, char *error, size_t error_size);

/// sd_notify(unset_environment, state): a negative errno, 0 when NOTIFY_SOCKET is unset, or a
/// positive number once sent. -ENOSYS before cbd_sd_load has succeeded.
int cbd_sd_notify(int unset_environment, const char *state);

/// sd_watchdog_enabled(unset_environment, usec): > 0 with the period in `usec` when systemd
/// asks this process for watchdog pings, 0 when not, a negative errno on a malformed
/// WATCHDOG_USEC. -ENOSYS before cbd_sd_load has succeeded.
int cbd_sd_watchdog_enabled(int unset_environment, uint64_t *usec);

#endif

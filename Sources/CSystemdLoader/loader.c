#include "CSystemdLoader.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

/* Each pointer's type is the function's own declaration in sd-daemon.h; `__typeof__` never
   evaluates its operand, so nothing here makes the linker ask for libsystemd. Written once under
   `lock`, then published through `loaded` (release/acquire), so any thread may call. */
static __typeof__(sd_notify) *notify_fn;
static __typeof__(sd_watchdog_enabled) *watchdog_enabled_fn;
static atomic_int loaded;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void report(char *error, size_t error_size, const char *message, const char *fallback) {
  if (error != NULL && error_size > 0) {
    snprintf(error, error_size, "%s", message != NULL ? message : fallback);
  }
}

int cbd_sd_load(const char *library, char *error, size_t error_size) {
  if (atomic_load_explicit(&loaded, memory_order_acquire)) return 0;
  pthread_mutex_lock(&lock);
  if (atomic_load_explicit(&loaded, memory_order_relaxed)) {
    pthread_mutex_unlock(&lock);
    return 0;
  }
  dlerror();
  void *handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) {
    report(error, error_size, dlerror(), "dlopen failed");
    pthread_mutex_unlock(&lock);
    return -1;
  }
  __typeof__(sd_notify) *notify = (__typeof__(sd_notify) *)dlsym(handle, "sd_notify");
  __typeof__(sd_watchdog_enabled) *watchdog =
      (__typeof__(sd_watchdog_enabled) *)dlsym(handle, "sd_watchdog_enabled");
  if (notify == NULL || watchdog == NULL) {
    report(error, error_size, dlerror(), "sd_notify not found");
    dlclose(handle);
    pthread_mutex_unlock(&lock);
    return -1;
  }
  notify_fn = notify;
  watchdog_enabled_fn = watchdog;
  atomic_store_explicit(&loaded, 1, memory_order_release);
  pthread_mutex_unlock(&lock);
  return 0;
}

int cbd_sd_notify(int unset_environment, const char *state) {
  if (!atomic_load_explicit(&loaded, memory_order_acquire)) return -ENOSYS;
  return notify_fn(unset_environment, state);
}

int cbd_sd_watchdog_enabled(int unset_environment, uint64_t *usec) {
  if (!atomic_load_explicit(&loaded, memory_order_acquire)) return -ENOSYS;
  return watchdog_enabled_fn(unset_environment, usec);
}

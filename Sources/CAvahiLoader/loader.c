#include "CAvahiLoader.h"

#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each pointer's type is the function's own declaration; `__typeof__` never evaluates its
   operand, so nothing here makes the linker ask for libavahi. */
#define CBD_AVAHI_COMMON(X)                                                                      \
  X(avahi_simple_poll_new)                                                                       \
  X(avahi_simple_poll_get)                                                                       \
  X(avahi_simple_poll_free)                                                                      \
  X(avahi_simple_poll_iterate)                                                                   \
  X(avahi_simple_poll_wakeup)                                                                    \
  X(avahi_simple_poll_set_func)                                                                  \
  X(avahi_alternative_host_name)                                                                 \
  X(avahi_strerror)                                                                              \
  X(avahi_address_parse)                                                                         \
  X(avahi_free)
#define CBD_AVAHI_CLIENT(X)                                                                      \
  X(avahi_client_new)                                                                            \
  X(avahi_client_free)                                                                           \
  X(avahi_client_errno)                                                                          \
  X(avahi_client_get_state)                                                                      \
  X(avahi_entry_group_new)                                                                       \
  X(avahi_entry_group_commit)                                                                    \
  X(avahi_entry_group_reset)                                                                     \
  X(avahi_entry_group_add_service)                                                               \
  X(avahi_entry_group_add_address)

static struct {
#define CBD_FIELD(name) __typeof__(name) *name;
  CBD_AVAHI_COMMON(CBD_FIELD)
  CBD_AVAHI_CLIENT(CBD_FIELD)
#undef CBD_FIELD
} av;
static atomic_int loaded;
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

static void report(char *error, size_t error_size, const char *message) {
  if (error != NULL && error_size > 0) snprintf(error, error_size, "%s", message);
}

int cbd_avahi_load(char *error, size_t error_size) {
  if (atomic_load_explicit(&loaded, memory_order_acquire)) return 0;
  pthread_mutex_lock(&load_lock);
  int result = 0;
  if (!atomic_load_explicit(&loaded, memory_order_relaxed)) {
    dlerror();
    void *common = dlopen("libavahi-common.so.3", RTLD_NOW | RTLD_LOCAL);
    void *client = common != NULL ? dlopen("libavahi-client.so.3", RTLD_NOW | RTLD_LOCAL) : NULL;
    if (client == NULL) {
      const char *reason = dlerror();
      report(error, error_size, reason != NULL ? reason : "dlopen failed");
      result = -1;
    } else {
#define CBD_RESOLVE(handle, name)                                                                \
  if (result == 0 && (av.name = (__typeof__(av.name))dlsym(handle, #name)) == NULL) {          \
    report(error, error_size, #name " not found");                                              \
    result = -1;                                                                                 \
  }
#define CBD_COMMON(name) CBD_RESOLVE(common, name)
#define CBD_CLIENT(name) CBD_RESOLVE(client, name)
      CBD_AVAHI_COMMON(CBD_COMMON)
      CBD_AVAHI_CLIENT(CBD_CLIENT)
      if (result == 0) atomic_store_explicit(&loaded, 1, memory_order_release);
    }
  }
  pthread_mutex_unlock(&load_lock);
  return result;
}

int cbd_avahi_alternative_host_name(const char *name, char *out, size_t out_size) {
  if (!atomic_load_explicit(&loaded, memory_order_acquire)) return -1;
  char *next = av.avahi_alternative_host_name(name);
  if (next == NULL) return -1;
  int fits = strlen(next) < out_size;
  if (fits) memcpy(out, next, strlen(next) + 1);
  av.avahi_free(next);
  return fits ? 0 : -1;
}

struct cbd_avahi_publisher {
  /* Held by the publisher's thread except while it waits in poll(): another thread that takes
     it may call into avahi, as avahi's own threaded poll does. */
  pthread_mutex_t lock;
  AvahiSimplePoll *poll;
  AvahiClient *client;
  AvahiEntryGroup *group;
  char *name; /* the label in use: "intake", after a conflict "intake-2" */
  uint16_t port;
  char **addresses;
  size_t address_count;
  int stopping;
  int failed; /* a failure was reported: say it once */
  cbd_avahi_callback callback;
  void *context;
};

static int unlocked_poll(struct pollfd *fds, unsigned int count, int timeout, void *userdata) {
  cbd_avahi_publisher *publisher = userdata;
  pthread_mutex_unlock(&publisher->lock);
  int result = poll(fds, count, timeout);
  pthread_mutex_lock(&publisher->lock);
  return result;
}

static void fail(cbd_avahi_publisher *publisher, int code) {
  if (publisher->failed) return;
  publisher->failed = 1;
  publisher->callback(publisher->context, CBD_AVAHI_FAILED, publisher->name, av.avahi_strerror(code));
}

static void group_changed(AvahiEntryGroup *group, AvahiEntryGroupState state, void *userdata);

/* (Re)publishes every record; called with the lock held. */
static void publish(cbd_avahi_publisher *publisher) {
  AvahiClient *client = publisher->client;
  if (client == NULL || av.avahi_client_get_state(client) != AVAHI_CLIENT_S_RUNNING) return;
  if (publisher->group == NULL) {
    publisher->group = av.avahi_entry_group_new(client, group_changed, publisher);
    if (publisher->group == NULL) {
      fail(publisher, av.avahi_client_errno(client));
      return;
    }
  } else {
    av.avahi_entry_group_reset(publisher->group);
  }
  if (publisher->address_count == 0) return; /* nothing to point the name at yet */
  char host[300];
  char service[300];
  snprintf(host, sizeof host, "%s.local", publisher->name);
  snprintf(service, sizeof service, "BrowserDrop on %s", publisher->name);
  int added = 0;
  for (size_t index = 0; index < publisher->address_count; index++) {
    AvahiAddress address;
    if (av.avahi_address_parse(publisher->addresses[index], AVAHI_PROTO_UNSPEC, &address) == NULL)
      continue;
    /* No reverse (PTR) entry: the address already has one, for the machine's own name. */
    if (av.avahi_entry_group_add_address(publisher->group, AVAHI_IF_UNSPEC, AVAHI_PROTO_UNSPEC,
                                         AVAHI_PUBLISH_NO_REVERSE, host, &address) == 0)
      added++;
  }
  if (added == 0) return;
  int code = av.avahi_entry_group_add_service(publisher->group, AVAHI_IF_UNSPEC,
                                              AVAHI_PROTO_UNSPEC, 0, service, "_http._tcp", NULL,
                                              host, publisher->port, "path=/", NULL);
  if (code == 0) code = av.avahi_entry_group_commit(publisher->group);
  if (code == AVAHI_ERR_COLLISION) {
    group_changed(publisher->group, AVAHI_ENTRY_GROUP_COLLISION, publisher);
  } else if (code < 0) {
    fail(publisher, code);
  }
}

static void group_changed(AvahiEntryGroup *group, AvahiEntryGroupState state, void *userdata) {
  cbd_avahi_publisher *publisher = userdata;
  (void)group;
  switch (state) {
  case AVAHI_ENTRY_GROUP_ESTABLISHED:
    publisher->failed = 0; /* a later failure is news again */
    publisher->callback(publisher->context, CBD_AVAHI_ESTABLISHED, publisher->name, "");
    break;
  case AVAHI_ENTRY_GROUP_COLLISION: {
    char *next = av.avahi_alternative_host_name(publisher->name);
    if (next == NULL) return;
    free(publisher->name);
    publisher->name = strdup(next);
    av.avahi_free(next);
    publisher->callback(publisher->context, CBD_AVAHI_RENAMED, publisher->name, "");
    publish(publisher);
    break;
  }
  case AVAHI_ENTRY_GROUP_FAILURE:
    fail(publisher, av.avahi_client_errno(publisher->client));
    break;
  default:
    break;
  }
}

static void client_changed(AvahiClient *client, AvahiClientState state, void *userdata) {
  cbd_avahi_publisher *publisher = userdata;
  publisher->client = client; /* first called from inside avahi_client_new */
  switch (state) {
  case AVAHI_CLIENT_S_RUNNING:
    publish(publisher);
    break;
  case AVAHI_CLIENT_S_COLLISION:
  case AVAHI_CLIENT_S_REGISTERING:
    if (publisher->group != NULL) av.avahi_entry_group_reset(publisher->group);
    break;
  case AVAHI_CLIENT_FAILURE: {
    int code = av.avahi_client_errno(client);
    fail(publisher, code);
    if (code != AVAHI_ERR_DISCONNECTED || publisher->stopping) break;
    /* avahi-daemon went away (restarted, upgraded): wait for it to come back and publish again,
       as avahi's own tools do. The group goes with the old client. */
    publisher->group = NULL;
    av.avahi_client_free(client);
    publisher->client = NULL;
    publisher->client = av.avahi_client_new(av.avahi_simple_poll_get(publisher->poll),
                                            AVAHI_CLIENT_NO_FAIL, client_changed, publisher, &code);
    break;
  }
  default:
    break;
  }
}

cbd_avahi_publisher *cbd_avahi_publisher_new(const char *name, uint16_t port,
                                             cbd_avahi_callback callback, void *context,
                                             char *error, size_t error_size) {
  if (!atomic_load_explicit(&loaded, memory_order_acquire)) {
    report(error, error_size, "libavahi-client is not loaded");
    return NULL;
  }
  cbd_avahi_publisher *publisher = calloc(1, sizeof *publisher);
  if (publisher == NULL) {
    report(error, error_size, "out of memory");
    return NULL;
  }
  pthread_mutex_init(&publisher->lock, NULL);
  publisher->name = strdup(name);
  publisher->port = port;
  publisher->callback = callback;
  publisher->context = context;
  publisher->poll = av.avahi_simple_poll_new();
  if (publisher->poll == NULL || publisher->name == NULL) {
    report(error, error_size, "out of memory");
    if (publisher->poll != NULL) av.avahi_simple_poll_free(publisher->poll);
    free(publisher->name);
    free(publisher);
    return NULL;
  }
  av.avahi_simple_poll_set_func(publisher->poll, unlocked_poll, publisher);
  int code = 0;
  pthread_mutex_lock(&publisher->lock);
  /* The failure callback is quiet while connecting: a NULL client's reason goes to `error`. */
  publisher->failed = 1;
  AvahiClient *client = av.avahi_client_new(av.avahi_simple_poll_get(publisher->poll), 0,
                                            client_changed, publisher, &code);
  publisher->failed = 0;
  pthread_mutex_unlock(&publisher->lock);
  if (client == NULL) {
    report(error, error_size, av.avahi_strerror(code));
    av.avahi_simple_poll_free(publisher->poll);
    free(publisher->name);
    free(publisher);
    return NULL;
  }
  publisher->client = client;
  return publisher;
}

void cbd_avahi_publisher_run(cbd_avahi_publisher *publisher) {
  pthread_mutex_lock(&publisher->lock);
  while (!publisher->stopping) {
    if (av.avahi_simple_poll_iterate(publisher->poll, -1) != 0) break;
  }
  pthread_mutex_unlock(&publisher->lock);
}

void cbd_avahi_publisher_free(cbd_avahi_publisher *publisher) {
  if (publisher->client != NULL) av.avahi_client_free(publisher->client); /* and the group */
  av.avahi_simple_poll_free(publisher->poll);
  for (size_t index = 0; index < publisher->address_count; index++) free(publisher->addresses[index]);
  free(publisher->addresses);
  free(publisher->name);
  pthread_mutex_destroy(&publisher->lock);
  free(publisher);
}

void cbd_avahi_publisher_set_addresses(cbd_avahi_publisher *publisher,
                                       const char *const *addresses, size_t count) {
  char **copy = calloc(count > 0 ? count : 1, sizeof *copy);
  if (copy == NULL) return;
  for (size_t index = 0; index < count; index++) copy[index] = strdup(addresses[index]);
  pthread_mutex_lock(&publisher->lock);
  for (size_t index = 0; index < publisher->address_count; index++) free(publisher->addresses[index]);
  free(publisher->addresses);
  publisher->addresses = copy;
  publisher->address_count = count;
  publish(publisher);
  pthread_mutex_unlock(&publisher->lock);
  av.avahi_simple_poll_wakeup(publisher->poll);
}

void cbd_avahi_publisher_stop(cbd_avahi_publisher *publisher) {
  pthread_mutex_lock(&publisher->lock);
  publisher->stopping = 1;
  pthread_mutex_unlock(&publisher->lock);
  av.avahi_simple_poll_wakeup(publisher->poll);
}

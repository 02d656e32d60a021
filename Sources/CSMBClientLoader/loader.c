#include "CSMBClientLoader.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

/* Every function the wrappers call, as smbc_<name>. Each pointer's type is taken from the
   function's own declaration in libsmbclient.h, so a wrapper that disagrees with the header does
   not compile; `__typeof__` never evaluates its operand, so nothing here refers to the library's
   symbols and the linker does not ask for libsmbclient. */
#define CBD_SMBC_FUNCTIONS(X)                                                                    \
  X(new_context)                                                                                 \
  X(init_context)                                                                                \
  X(free_context)                                                                                \
  X(setDebug)                                                                                    \
  X(setLogCallback)                                                                              \
  X(setOptionUserData)                                                                           \
  X(getOptionUserData)                                                                           \
  X(setFunctionAuthDataWithContext)                                                              \
  X(setOptionNoAutoAnonymousLogin)                                                               \
  X(setOptionUseKerberos)                                                                        \
  X(setOptionFallbackAfterKerberos)                                                              \
  X(setPort)                                                                                     \
  X(setTimeout)                                                                                  \
  X(setOptionProtocols)                                                                          \
  X(setOptionSmbEncryptionLevel)                                                                 \
  X(getFunctionStat)                                                                             \
  X(getFunctionMkdir)                                                                            \
  X(getFunctionOpen)                                                                             \
  X(getFunctionRead)                                                                             \
  X(getFunctionWrite)                                                                            \
  X(getFunctionClose)                                                                            \
  X(getFunctionRename)                                                                           \
  X(getFunctionUnlink)

struct functions {
#define CBD_FIELD(name) __typeof__(smbc_##name) *name;
  CBD_SMBC_FUNCTIONS(CBD_FIELD)
#undef CBD_FIELD
};

/* Written once, under `lock`, by the first successful load; read-only afterwards. */
static struct functions smbc;
static int loaded;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void report(char *error, size_t error_size, const char *message, const char *fallback) {
  if (error != NULL && error_size > 0) {
    snprintf(error, error_size, "%s", message != NULL ? message : fallback);
  }
}

int cbd_smbc_load(const char *library, char *error, size_t error_size) {
  pthread_mutex_lock(&lock);
  dlerror(); /* forget an earlier, unrelated error */
  void *handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) {
    report(error, error_size, dlerror(), "dlopen failed");
    pthread_mutex_unlock(&lock);
    return -1;
  }
  struct functions found;
#define CBD_RESOLVE(name)                                                                        \
  found.name = (__typeof__(found.name))dlsym(handle, "smbc_" #name);                             \
  if (found.name == NULL) {                                                                      \
    report(error, error_size, dlerror(), "smbc_" #name " not found");                            \
    dlclose(handle);                                                                             \
    pthread_mutex_unlock(&lock);                                                                 \
    return -1;                                                                                   \
  }
  CBD_SMBC_FUNCTIONS(CBD_RESOLVE)
#undef CBD_RESOLVE
  if (loaded) {
    dlclose(handle); /* the library already in use keeps its own reference */
  } else {
    smbc = found;
    loaded = 1;
  }
  pthread_mutex_unlock(&lock);
  return 0;
}

SMBCCTX *cbd_smbc_new_context(void) { return smbc.new_context(); }

SMBCCTX *cbd_smbc_init_context(SMBCCTX *context) { return smbc.init_context(context); }

int cbd_smbc_free_context(SMBCCTX *context, int shutdown_ctx) {
  return smbc.free_context(context, shutdown_ctx);
}

void cbd_smbc_setDebug(SMBCCTX *context, int debug) { smbc.setDebug(context, debug); }

void cbd_smbc_setLogCallback(SMBCCTX *context, void *private_ptr, smbc_debug_callback_fn fn) {
  smbc.setLogCallback(context, private_ptr, fn);
}

void cbd_smbc_setOptionUserData(SMBCCTX *context, void *user_data) {
  smbc.setOptionUserData(context, user_data);
}

void *cbd_smbc_getOptionUserData(SMBCCTX *context) { return smbc.getOptionUserData(context); }

void cbd_smbc_setFunctionAuthDataWithContext(
    SMBCCTX *context, smbc_get_auth_data_with_context_fn fn) {
  smbc.setFunctionAuthDataWithContext(context, fn);
}

void cbd_smbc_setOptionNoAutoAnonymousLogin(SMBCCTX *context, smbc_bool value) {
  smbc.setOptionNoAutoAnonymousLogin(context, value);
}

void cbd_smbc_setOptionUseKerberos(SMBCCTX *context, smbc_bool value) {
  smbc.setOptionUseKerberos(context, value);
}

void cbd_smbc_setOptionFallbackAfterKerberos(SMBCCTX *context, smbc_bool value) {
  smbc.setOptionFallbackAfterKerberos(context, value);
}

void cbd_smbc_setPort(SMBCCTX *context, uint16_t port) { smbc.setPort(context, port); }

void cbd_smbc_setTimeout(SMBCCTX *context, int timeout) { smbc.setTimeout(context, timeout); }

smbc_bool cbd_smbc_setOptionProtocols(
    SMBCCTX *context, const char *min_proto, const char *max_proto) {
  return smbc.setOptionProtocols(context, min_proto, max_proto);
}

void cbd_smbc_setOptionSmbEncryptionLevel(SMBCCTX *context, smbc_smb_encrypt_level level) {
  smbc.setOptionSmbEncryptionLevel(context, level);
}

smbc_stat_fn cbd_smbc_getFunctionStat(SMBCCTX *context) { return smbc.getFunctionStat(context); }

smbc_mkdir_fn cbd_smbc_getFunctionMkdir(SMBCCTX *context) {
  return smbc.getFunctionMkdir(context);
}

smbc_open_fn cbd_smbc_getFunctionOpen(SMBCCTX *context) { return smbc.getFunctionOpen(context); }

smbc_read_fn cbd_smbc_getFunctionRead(SMBCCTX *context) { return smbc.getFunctionRead(context); }

smbc_write_fn cbd_smbc_getFunctionWrite(SMBCCTX *context) {
  return smbc.getFunctionWrite(context);
}

smbc_close_fn cbd_smbc_getFunctionClose(SMBCCTX *context) {
  return smbc.getFunctionClose(context);
}

smbc_rename_fn cbd_smbc_getFunctionRename(SMBCCTX *context) {
  return smbc.getFunctionRename(context);
}

smbc_unlink_fn cbd_smbc_getFunctionUnlink(SMBCCTX *context) {
  return smbc.getFunctionUnlink(context);
}

#define _GNU_SOURCE /* close_range */

#include "CSMBClientLoader.h"

#include "CBrowserDropLinux.h" /* cbd_append_record, shared with Durable.append */

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

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
  X(getFunctionCheckServer)                                                                      \
  X(setFunctionCheckServer)                                                                      \
  X(setOptionNoAutoAnonymousLogin)                                                               \
  X(setOptionUseKerberos)                                                                        \
  X(setOptionFallbackAfterKerberos)                                                              \
  X(setPort)                                                                                     \
  X(setTimeout)                                                                                  \
  X(getTimeout)                                                                                  \
  X(setOptionProtocols)                                                                          \
  X(setOptionSmbEncryptionLevel)                                                                 \
  X(getOptionOpenShareMode)                                                                      \
  X(setOptionOpenShareMode)                                                                      \
  X(getFunctionStat)                                                                             \
  X(getFunctionMkdir)                                                                            \
  X(getFunctionOpen)                                                                             \
  X(getFunctionRead)                                                                             \
  X(getFunctionWrite)                                                                            \
  X(getFunctionLseek)                                                                            \
  X(getFunctionClose)                                                                            \
  X(getFunctionRename)                                                                           \
  X(getFunctionUnlink)                                                                            \
  X(getFunctionOpendir)                                                                          \
  X(getFunctionReaddir)                                                                          \
  X(getFunctionClosedir)

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

smbc_check_server_fn cbd_smbc_getFunctionCheckServer(SMBCCTX *context) {
  return smbc.getFunctionCheckServer(context);
}

void cbd_smbc_setFunctionCheckServer(SMBCCTX *context, smbc_check_server_fn fn) {
  smbc.setFunctionCheckServer(context, fn);
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

int cbd_smbc_getTimeout(SMBCCTX *context) { return smbc.getTimeout(context); }

smbc_bool cbd_smbc_setOptionProtocols(
    SMBCCTX *context, const char *min_proto, const char *max_proto) {
  return smbc.setOptionProtocols(context, min_proto, max_proto);
}

void cbd_smbc_setOptionSmbEncryptionLevel(SMBCCTX *context, smbc_smb_encrypt_level level) {
  smbc.setOptionSmbEncryptionLevel(context, level);
}

int cbd_smbc_open_sharing_reads(SMBCCTX *context, const char *url) {
  smbc_share_mode before = smbc.getOptionOpenShareMode(context);
  smbc.setOptionOpenShareMode(context, SMBC_SHAREMODE_DENY_WRITE);
  SMBCFILE *file = smbc.getFunctionOpen(context)(context, url, O_RDONLY, 0);
  int saved = errno;
  smbc.setOptionOpenShareMode(context, before);
  if (file == NULL) {
    errno = saved;
    return -1;
  }
  smbc.getFunctionClose(context)(context, file);
  return 0;
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

smbc_lseek_fn cbd_smbc_getFunctionLseek(SMBCCTX *context) {
  return smbc.getFunctionLseek(context);
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

smbc_opendir_fn cbd_smbc_getFunctionOpendir(SMBCCTX *context) {
  return smbc.getFunctionOpendir(context);
}

smbc_readdir_fn cbd_smbc_getFunctionReaddir(SMBCCTX *context) {
  return smbc.getFunctionReaddir(context);
}

smbc_closedir_fn cbd_smbc_getFunctionClosedir(SMBCCTX *context) {
  return smbc.getFunctionClosedir(context);
}

/* ---- A second writer in a child process (see cbd_smbc_fork_writer in the header). ---- */

int64_t *cbd_shared_counter_create(void) {
  void *page =
      mmap(NULL, sizeof(int64_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return NULL;
  __atomic_store_n((int64_t *)page, 0, __ATOMIC_RELEASE);
  return (int64_t *)page;
}

int64_t cbd_shared_counter_load(const int64_t *counter) {
  return __atomic_load_n(counter, __ATOMIC_ACQUIRE);
}

void cbd_shared_counter_destroy(int64_t *counter) { munmap(counter, sizeof(int64_t)); }

/* The child's login; a static because libsmbclient's auth callback has no other way to reach it
   (the child has one thread and one context). */
static const struct cbd_smbc_login *child_login;
static char child_password[256];

static void child_discard_log(void *private_ptr, int level, const char *message) {
  (void)private_ptr;
  (void)level;
  (void)message;
}

static void child_copy(char *buffer, int capacity, const char *text) {
  if (buffer == NULL || capacity <= 0 || text == NULL) return;
  snprintf(buffer, (size_t)capacity, "%s", text);
}

static void child_authenticate(SMBCCTX *context, const char *server, const char *share,
    char *workgroup, int workgroup_length, char *username, int username_length, char *password,
    int password_length) {
  (void)context;
  (void)server;
  (void)share;
  if (child_login->workgroup != NULL && child_login->workgroup[0] != 0) {
    child_copy(workgroup, workgroup_length, child_login->workgroup);
  }
  child_copy(username, username_length, child_login->username);
  child_copy(password, password_length, child_password);
}

/* An errno as an exit status the parent can tell from success and from a signal. */
static int child_status(int code) { return code > 0 && code < 256 ? code : EIO; }

/* The host's handlers are Swift or write to descriptors closed below: every caught signal gets
   its default action back (one ignored by the host stays ignored, as under nohup). `stoppers`
   (SIGTERM, SIGINT…) then get `stop_action`. A vanished peer must be EPIPE, not a signal. The
   forking thread blocks the asynchronous signals; the child blocks none. */
static void child_signals(const int *stoppers, size_t count, void (*stop_action)(int)) {
  struct sigaction action;
  for (int number = 1; number < NSIG; number++) {
    if (number == SIGKILL || number == SIGSTOP) continue;
    if (sigaction(number, NULL, &action) != 0) continue; /* glibc's reserved real-time ones */
    if ((action.sa_flags & SA_SIGINFO) != 0 || action.sa_handler != SIG_IGN) {
      memset(&action, 0, sizeof action);
      sigemptyset(&action.sa_mask);
      action.sa_handler = SIG_DFL;
      sigaction(number, &action, NULL);
    }
  }
  memset(&action, 0, sizeof action);
  sigemptyset(&action.sa_mask);
  action.sa_handler = stop_action;
  for (size_t index = 0; index < count; index++) sigaction(stoppers[index], &action, NULL);
  action.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &action, NULL);
  sigset_t none;
  sigemptyset(&none);
  pthread_sigmask(SIG_SETMASK, &none, NULL);
}

/* Keeps only `keep` (as fd 3), `second` (as fd 4, unless it is -1) and /dev/null on 0-2: a
   copy of the parent's listening or client sockets would otherwise stay open (and a closed
   connection unfinished) until the child exits, and nothing the library prints can reach the
   parent's output. Returns 3, or -errno. */
static int child_descriptors(int keep, int second) {
  int kept = fcntl(keep, F_DUPFD, 10);
  if (kept < 0) return -errno;
  int other = second >= 0 ? fcntl(second, F_DUPFD, 10) : -1;
  if (second >= 0 && other < 0) return -errno;
  int null = open("/dev/null", O_RDWR);
  if (null < 0) return -errno;
  for (int fd = 0; fd <= 2; fd++) {
    if (dup2(null, fd) < 0) return -errno;
  }
  if (dup2(kept, 3) < 0) return -errno;
  int first_closed = 4;
  if (other >= 0) {
    if (dup2(other, 4) < 0) return -errno;
    first_closed = 5;
  }
  if (close_range((unsigned)first_closed, ~0U, 0) != 0) {
    /* Kernels before 5.9 (ENOSYS): every number the process may have open, which is below its
       descriptor limit unless the limit was lowered after the descriptor was opened; at least
       65536, and at most the kernel's own ceiling (fs.nr_open, 1048576 by default), which a
       loop of close() covers in well under a second. */
    struct rlimit limit;
    rlim_t end = 65536;
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur > end) {
      end = limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur > 1048576 ? 1048576 : limit.rlim_cur;
    }
    for (rlim_t fd = (rlim_t)first_closed; fd < end; fd++) close((int)fd);
  }
  return 3;
}

/* Creates, configures and initialises the child's own context (debug level 0, log discarded),
   with `login`'s credentials; NULL with errno set on failure. The password is wiped from the
   job at once; `child_password` is wiped by child_signed_in. */
static SMBCCTX *child_context(const struct cbd_smbc_login *login) {
  child_login = login;
  snprintf(child_password, sizeof child_password, "%s",
      login->password != NULL ? login->password : "");
  if (login->password != NULL) explicit_bzero(login->password, strlen(login->password));

  SMBCCTX *context = smbc.new_context();
  if (context == NULL) return NULL;
  smbc.setDebug(context, 0);
  smbc.setLogCallback(context, NULL, child_discard_log);
  smbc.setFunctionAuthDataWithContext(context, child_authenticate);
  smbc.setOptionNoAutoAnonymousLogin(context, login->guest ? 0 : 1);
  smbc.setOptionUseKerberos(context, 0);
  smbc.setOptionFallbackAfterKerberos(context, 1);
  smbc.setPort(context, login->port);
  if (smbc.init_context(context) == NULL) {
    int code = errno;
    explicit_bzero(child_password, sizeof child_password);
    smbc.free_context(context, 1);
    errno = code;
    return NULL;
  }
  smbc.setTimeout(context, login->timeout_ms);
  smbc.setOptionProtocols(context, login->min_protocol, login->max_protocol);
  smbc.setOptionSmbEncryptionLevel(context, (smbc_smb_encrypt_level)login->encryption_level);
  return context;
}

/* The first open has signed in: the password is no longer needed. */
static void child_signed_in(void) { explicit_bzero(child_password, sizeof child_password); }

/* Everything the writer child does; its return value is its exit status. Only C and
   libsmbclient run here: never the Swift runtime, never the parent's contexts, sockets or file
   handles. */
static int child_main(const struct cbd_smbc_writer *job, pid_t parent) {
  /* Die with the parent (strictly: with the thread that forked, the SMB thread, which lives as
     long as the process); the check closes the race where the parent died before the prctl. */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return child_status(errno);
  if (getppid() != parent) return ECHILD;
  prctl(PR_SET_NAME, "bd-smb-writer"); /* for ps and top, instead of the SMB thread's name */
  /* SIGTERM and SIGINT always end the writer. */
  const int stoppers[] = {SIGTERM, SIGINT};
  child_signals(stoppers, 2, SIG_DFL);
  int source = child_descriptors(job->source_fd, -1);
  if (source < 0) return child_status(-source);

  SMBCCTX *context = child_context(&job->login);
  if (context == NULL) return child_status(errno);
  int result = 0;
  SMBCFILE *file = smbc.getFunctionOpen(context)(context, job->login.url, O_WRONLY, 0644);
  child_signed_in();
  if (file == NULL) {
    result = child_status(errno);
    smbc.free_context(context, 1);
    return result;
  }
  char *buffer = malloc((size_t)job->stripe_size);
  if (buffer == NULL) result = ENOMEM;
  smbc_lseek_fn seek = smbc.getFunctionLseek(context);
  smbc_write_fn write_fn = smbc.getFunctionWrite(context);
  for (int64_t offset = job->stripe_size * job->stripe_index; result == 0 && offset < job->size;
       offset += job->stripe_size * job->stripe_count) {
    size_t length =
        (size_t)(job->size - offset < job->stripe_size ? job->size - offset : job->stripe_size);
    size_t filled = 0;
    while (filled < length) {
      ssize_t got = pread(source, buffer + filled, length - filled, (off_t)(offset + filled));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        /* A source that shrank since the scan: the parent reports it. */
        result = got == 0 ? ENODATA : child_status(errno);
        break;
      }
      filled += (size_t)got;
    }
    if (result != 0) break;
    if (seek(context, file, (off_t)offset, SEEK_SET) < 0) {
      result = child_status(errno);
      break;
    }
    size_t written = 0;
    while (written < length) {
      ssize_t count = write_fn(context, file, buffer + written, length - written);
      if (count <= 0) {
        result = child_status(errno);
        break;
      }
      written += (size_t)count;
    }
    if (result == 0 && job->progress != NULL) {
      __atomic_fetch_add(job->progress, (int64_t)length, __ATOMIC_RELEASE);
    }
  }
  free(buffer);
  if (smbc.getFunctionClose(context)(context, file) < 0 && result == 0) {
    result = child_status(errno);
  }
  smbc.free_context(context, 1);
  return result;
}

pid_t cbd_smbc_fork_writer(const struct cbd_smbc_writer *job) {
  pid_t parent = getpid();
  pid_t child = fork();
  if (child != 0) return child; /* the parent: the child's PID, or -1 with errno */
  _exit(child_main(job, parent));
}

/* Appends the whole record and flushes it (cut off again when either fails); 0 or the errno. */
static int claim_record(int fd, const char *record, size_t length) {
  const char *call;
  int code = cbd_append_record(fd, record, length, &call);
  return code == 0 ? 0 : child_status(code);
}

/* ---- One long-lived claim child per delivery (see cbd_smbc_fork_claimer in the header). ---- */

/* Reads exactly `length` bytes: 1 when read, 0 at end of file before the first byte, -1 on an
   error or an end in the middle. */
static int claimer_read(int fd, void *buffer, size_t length) {
  size_t done = 0;
  while (done < length) {
    ssize_t count = read(fd, (char *)buffer + done, length - done);
    if (count < 0 && errno == EINTR) continue;
    if (count < 0) return -1;
    if (count == 0) return done == 0 ? 0 : -1;
    done += (size_t)count;
  }
  return 1;
}

/* Writes all of `length` bytes to a socket, without SIGPIPE; 0 or the errno. */
static int claimer_send(int fd, const void *buffer, size_t length) {
  size_t done = 0;
  while (done < length) {
    ssize_t count = send(fd, (const char *)buffer + done, length - done, MSG_NOSIGNAL);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) return count < 0 ? child_status(errno) : EIO;
    done += (size_t)count;
  }
  return 0;
}

/* One claim on the child's context: the exclusive create, the record appended and flushed,
   the token written through the create's own handle, then the close; a record that fails
   removes the file just created. 0, EEXIST or the errno. */
static int claimer_claim(SMBCCTX *context, const char *url, int record, const char *line,
    size_t length, const char *token, size_t token_length, unsigned bound_seconds) {
  SMBCFILE *file = smbc.getFunctionOpen(context)(context, url, O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (file == NULL) return errno == EEXIST || errno == EISDIR ? EEXIST : child_status(errno);
  /* Created: the record comes before anything else that could fail or wait, and the alarm
     must not come between the two either. A reconnect inside the open (a server that dropped
     the idle connection) may have used most of the bound, so the alarm is off for the record
     (a local append and fdatasync) and set again, in full, for the close and the unlink. */
  alarm(0);
  int result = claim_record(record, line, length);
  alarm(bound_seconds);
  /* The token goes into the file this handle created, never into one found by name. A write
     that fails leaves the claim empty (it is recorded all the same): the parent reads its size. */
  size_t written = 0;
  while (result == 0 && written < token_length) {
    ssize_t count =
        smbc.getFunctionWrite(context)(context, file, token + written, token_length - written);
    if (count <= 0) break;
    written += (size_t)count;
  }
  smbc.getFunctionClose(context)(context, file); /* a claim: a failed close loses nothing */
  /* Not recorded: this child just created it, so it is the one file it may remove. */
  if (result != 0) smbc.getFunctionUnlink(context)(context, url);
  return result;
}

/* The claim child's loop: one request at a time until the socket's end of file. */
static int claimer_main(const struct cbd_smbc_claimer *job) {
  prctl(PR_SET_NAME, "bd-smb-claim");
  /* A stop of the service (SIGTERM to the whole group) must not come between a create and its
     record either; the alarm bounds the child instead. */
  const int stoppers[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
  child_signals(stoppers, 4, SIG_IGN);
  struct sigaction action;
  memset(&action, 0, sizeof action);
  sigemptyset(&action.sa_mask);
  action.sa_handler = SIG_DFL; /* even where the host ignores it: the alarm must end the child */
  sigaction(SIGALRM, &action, NULL);
  /* A file size limit (RLIMIT_FSIZE) must fail the record's write with EFBIG, which undoes it,
     rather than kill the child between the create and its record. */
  action.sa_handler = SIG_IGN;
  sigaction(SIGXFSZ, &action, NULL);
  alarm(job->bound_seconds);
  int record = child_descriptors(job->record_fd, job->socket_fd);
  if (record < 0) return child_status(-record);
  const int peer = 4;

  SMBCCTX *context = child_context(&job->login);
  if (context == NULL) return child_status(errno);
  int result = 0;
  char *url = NULL;
  char *line = NULL;
  char *token = NULL;
  for (;;) {
    /* Waiting is bounded too: a parent that keeps its end open and asks nothing. */
    alarm(job->bound_seconds);
    uint32_t header[3];
    int got = claimer_read(peer, header, sizeof header);
    if (got == 0) break; /* the parent closed its end, or is gone */
    if (got < 0 || header[0] == 0 || header[0] > CBD_CLAIM_MAX_FIELD ||
        header[1] > CBD_CLAIM_MAX_FIELD || header[2] > CBD_CLAIM_MAX_FIELD) {
      result = EPROTO;
      break;
    }
    url = malloc((size_t)header[0] + 1);
    line = malloc((size_t)header[1] + 1);
    token = malloc((size_t)header[2] + 1);
    if (url == NULL || line == NULL || token == NULL) {
      result = ENOMEM;
      break;
    }
    /* A request cut short means the parent died while sending it: nothing was asked. */
    if (claimer_read(peer, url, header[0]) != 1 || claimer_read(peer, line, header[1]) != 1 ||
        claimer_read(peer, token, header[2]) != 1) {
      break;
    }
    url[header[0]] = 0;
    alarm(job->bound_seconds); /* the claim gets the whole bound, however long the wait was */
    int32_t answer = claimer_claim(
        context, url, record, line, header[1], token, header[2], job->bound_seconds);
    free(url);
    free(line);
    free(token);
    url = line = token = NULL;
    /* A parent that is gone gets no answer (EPIPE); the next read sees its end of file. */
    claimer_send(peer, &answer, sizeof answer);
  }
  free(url);
  free(line);
  free(token);
  explicit_bzero(child_password, sizeof child_password);
  /* No smbc_free_context, neither with shutdown_ctx 1 nor 0: both end each connection with a
     tree disconnect and wait for its answer (0 differs only in refusing, EBUSY, while a file is
     open), and on a server that stopped answering that takes the whole request timeout
     (measured against a SIGSTOPped smbd 4.17: 3.0 s at a 3 s timeout with either value, 0.0 s
     while it answers), all while the SMB thread waits for this child in a blocking waitpid
     (SMBClaimChild.end) and the delivery's next step waits behind it. Every claim's file is
     closed already and nothing else is open, so the _exit that follows loses nothing: the
     kernel closes the connection and the server ends the session and tree connect itself, as
     it does for any client that goes away. */
  return result;
}

pid_t cbd_smbc_fork_claimer(const struct cbd_smbc_claimer *job) {
  pid_t child = fork();
  if (child != 0) return child;
  _exit(claimer_main(job));
}

int cbd_claimer_send(int socket, const char *url, const char *record, size_t record_length,
    const char *token, size_t token_length) {
  size_t url_length = strlen(url);
  if (url_length == 0 || url_length > CBD_CLAIM_MAX_FIELD || record_length > CBD_CLAIM_MAX_FIELD ||
      token_length > CBD_CLAIM_MAX_FIELD) {
    return EINVAL;
  }
  uint32_t header[3] = {(uint32_t)url_length, (uint32_t)record_length, (uint32_t)token_length};
  int result = claimer_send(socket, header, sizeof header);
  if (result == 0) result = claimer_send(socket, url, url_length);
  if (result == 0) result = claimer_send(socket, record, record_length);
  if (result == 0 && token_length > 0) result = claimer_send(socket, token, token_length);
  return result;
}

int cbd_claimer_receive(int socket) {
  int32_t answer = 0;
  if (claimer_read(socket, &answer, sizeof answer) != 1) return -1;
  return answer;
}

int cbd_claimer_alive(int socket) {
  struct pollfd peer = {.fd = socket, .events = POLLIN};
  for (;;) {
    int ready = poll(&peer, 1, 0);
    if (ready < 0 && errno == EINTR) continue;
    /* The child never speaks unasked: anything to read (its end of file) or a hang-up means
       it is gone. */
    return ready == 0;
  }
}

int cbd_child_wait_exited(pid_t child) {
  siginfo_t info;
  for (;;) {
    memset(&info, 0, sizeof info);
    if (waitid(P_PID, (id_t)child, &info, WEXITED | WNOWAIT) == 0) return 0;
    if (errno != EINTR) return errno;
  }
}

int cbd_child_reap(pid_t child, int *status) {
  for (;;) {
    int raw = 0;
    pid_t got = waitpid(child, &raw, WNOHANG);
    if (got == child) {
      *status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -(WIFSIGNALED(raw) ? WTERMSIG(raw) : 1);
      return 0;
    }
    if (got == 0) return EAGAIN;
    if (errno != EINTR) return errno;
  }
}

int cbd_children_reapable(void) {
  struct sigaction current;
  if (sigaction(SIGCHLD, NULL, &current) != 0) return 0;
  return current.sa_handler != SIG_IGN && (current.sa_flags & SA_NOCLDWAIT) == 0;
}

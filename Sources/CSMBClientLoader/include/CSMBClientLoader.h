#ifndef C_SMBCLIENT_LOADER_H
#define C_SMBCLIENT_LOADER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/stat.h>
#include <fcntl.h>

/* Only the declarations of libsmbclient-dev are used: the library itself is opened with dlopen
   when SMB is first used, so programs that never forward to SMB never map it (nor the ~100 samba,
   gnutls, krb5 and ICU libraries it needs). The path is the one smbclient.pc names, spelled out
   because depending on the pkg-config system library would link libsmbclient (see Package.swift). */
#if __has_include(<samba-4.0/libsmbclient.h>)
#include <samba-4.0/libsmbclient.h>
#else
#error "libsmbclient.h not found: install the Debian package libsmbclient-dev (scripts/setup.sh)"
#endif

/// Opens `library` (normally "libsmbclient.so.0") with dlopen(RTLD_NOW | RTLD_LOCAL) and resolves
/// every libsmbclient function the `cbd_smbc_*` wrappers below call.
///
/// Returns 0 when the library loaded and has all of them. Otherwise returns -1 and writes the
/// dynamic loader's reason (dlerror's text, e.g. "libsmbclient.so.0: cannot open shared object
/// file: No such file or directory") to `error`, NUL-terminated and cut to `error_size` bytes;
/// nothing is kept, so a later call tries again (after the package has been installed).
///
/// Thread-safe, and cheap after the first success: the first library that loads stays in use for
/// the life of the process and is never closed; a later call only checks that `library` loads
/// (dlopen of a loaded library just counts a reference, released again at once).
///
/// Call the wrappers only on a thread that has itself had 0 from this function: the lock it takes
/// is what makes the resolved functions visible to that thread.
int cbd_smbc_load(const char *library, char *error, size_t error_size);

/* The libsmbclient functions BrowserDropForwarding calls, each forwarding to the function of the
   same name without `cbd_` in the library cbd_smbc_load opened; see libsmbclient.h for what they
   do. Calling one before cbd_smbc_load has succeeded is a NULL call. */

/// smbc_new_context: a new, uninitialised context, or NULL with errno set.
SMBCCTX *cbd_smbc_new_context(void);
/// smbc_init_context: initialises `context`; NULL with errno set on failure.
SMBCCTX *cbd_smbc_init_context(SMBCCTX *context);
/// smbc_free_context: frees `context`, closing its connections when `shutdown_ctx` is 1.
int cbd_smbc_free_context(SMBCCTX *context, int shutdown_ctx);
/// smbc_setDebug: the library's log level for `context` (0 = errors only).
void cbd_smbc_setDebug(SMBCCTX *context, int debug);
/// smbc_setLogCallback: where `context`'s log lines go instead of stderr.
void cbd_smbc_setLogCallback(SMBCCTX *context, void *private_ptr, smbc_debug_callback_fn fn);
/// smbc_setOptionUserData: a pointer kept with `context` for callbacks.
void cbd_smbc_setOptionUserData(SMBCCTX *context, void *user_data);
/// smbc_getOptionUserData: the pointer set with cbd_smbc_setOptionUserData.
void *cbd_smbc_getOptionUserData(SMBCCTX *context);
/// smbc_setFunctionAuthDataWithContext: the callback that supplies credentials.
void cbd_smbc_setFunctionAuthDataWithContext(
    SMBCCTX *context, smbc_get_auth_data_with_context_fn fn);
/// smbc_getFunctionCheckServer: the function that tells whether a cached connection is dead
/// (libsmbclient then opens a new one).
smbc_check_server_fn cbd_smbc_getFunctionCheckServer(SMBCCTX *context);
/// smbc_setFunctionCheckServer: replaces that function.
void cbd_smbc_setFunctionCheckServer(SMBCCTX *context, smbc_check_server_fn fn);
/// smbc_setOptionNoAutoAnonymousLogin: whether a rejected sign-in may fall back to guest.
void cbd_smbc_setOptionNoAutoAnonymousLogin(SMBCCTX *context, smbc_bool value);
/// smbc_setOptionUseKerberos: whether to try Kerberos.
void cbd_smbc_setOptionUseKerberos(SMBCCTX *context, smbc_bool value);
/// smbc_setOptionFallbackAfterKerberos: whether to try NTLM after Kerberos.
void cbd_smbc_setOptionFallbackAfterKerberos(SMBCCTX *context, smbc_bool value);
/// smbc_setPort: the TCP port to connect to (0 means the default).
void cbd_smbc_setPort(SMBCCTX *context, uint16_t port);
/// smbc_setTimeout: how long to wait for a connection or a reply, in milliseconds.
void cbd_smbc_setTimeout(SMBCCTX *context, int timeout);
/// smbc_getTimeout: the milliseconds the context waits, as libsmbclient holds them.
int cbd_smbc_getTimeout(SMBCCTX *context);
/// Opens the file at `url` for reading, sharing it with readers only (SMB share access read:
/// `SMBC_SHAREMODE_DENY_WRITE`), then closes it; the context's share mode is restored whatever
/// happens. 0 when the open succeeded; -1 with errno otherwise (`EBUSY` for a sharing violation:
/// a handle of any connection that may write, delete or rename the file is open on it).
int cbd_smbc_open_sharing_reads(SMBCCTX *context, const char *url);
/// smbc_setOptionProtocols: the lowest and highest protocol to negotiate (e.g. "SMB2",
/// "SMB3"); false when not accepted.
smbc_bool cbd_smbc_setOptionProtocols(
    SMBCCTX *context, const char *min_proto, const char *max_proto);
/// smbc_setOptionSmbEncryptionLevel: whether to ask for or require encryption.
void cbd_smbc_setOptionSmbEncryptionLevel(SMBCCTX *context, smbc_smb_encrypt_level level);
/// smbc_getFunctionStat: `context`'s stat.
smbc_stat_fn cbd_smbc_getFunctionStat(SMBCCTX *context);
/// smbc_getFunctionMkdir: `context`'s mkdir.
smbc_mkdir_fn cbd_smbc_getFunctionMkdir(SMBCCTX *context);
/// smbc_getFunctionOpen: `context`'s open.
smbc_open_fn cbd_smbc_getFunctionOpen(SMBCCTX *context);
/// smbc_getFunctionRead: `context`'s read.
smbc_read_fn cbd_smbc_getFunctionRead(SMBCCTX *context);
/// smbc_getFunctionWrite: `context`'s write.
smbc_write_fn cbd_smbc_getFunctionWrite(SMBCCTX *context);
/// smbc_getFunctionLseek: `context`'s lseek.
smbc_lseek_fn cbd_smbc_getFunctionLseek(SMBCCTX *context);
/// smbc_getFunctionClose: `context`'s close.
smbc_close_fn cbd_smbc_getFunctionClose(SMBCCTX *context);
/// smbc_getFunctionRename: `context`'s rename.
smbc_rename_fn cbd_smbc_getFunctionRename(SMBCCTX *context);
/// smbc_getFunctionUnlink: `context`'s unlink.
smbc_unlink_fn cbd_smbc_getFunctionUnlink(SMBCCTX *context);
/// smbc_getFunctionOpendir: `context`'s opendir.
smbc_opendir_fn cbd_smbc_getFunctionOpendir(SMBCCTX *context);
/// smbc_getFunctionReaddir: `context`'s readdir.
smbc_readdir_fn cbd_smbc_getFunctionReaddir(SMBCCTX *context);
/// smbc_getFunctionClosedir: `context`'s closedir.
smbc_closedir_fn cbd_smbc_getFunctionClosedir(SMBCCTX *context);

/* ---- A second writer in a child process ----
   libsmbclient is not thread-safe even with one context per thread, and smbc_write has one
   request on the wire at a time; a second connection in a forked child (which never returns to
   Swift) keeps two writes in flight. */

/// How a forked child signs in on a connection of its own, as plain C data: it must stay valid
/// until the fork returns (the child works on its own copy of the parent's memory).
struct cbd_smbc_login {
  /// The file, `smb://host:port/share/path`, percent-encoded.
  const char *url;
  /// The TCP port (also in `url`).
  uint16_t port;
  /// Nonzero for guest access (then `username` and `password` are "").
  int guest;
  /// User name, workgroup ("" for the server's default) and password. The child copies the
  /// password and wipes both copies with explicit_bzero once it has signed in; the parent wipes
  /// its own buffer after the fork returns.
  const char *username;
  const char *workgroup;
  char *password;
  /// smbc_setTimeout's milliseconds, smbc_setOptionProtocols' bounds, and the
  /// smbc_smb_encrypt_level, as the parent's context has them.
  int timeout_ms;
  const char *min_protocol;
  const char *max_protocol;
  int encryption_level;
};

/// What a forked writer needs. The file at `login.url` must already exist (the child opens it
/// O_WRONLY, never creating or truncating it).
struct cbd_smbc_writer {
  struct cbd_smbc_login login;
  /// The source file, open for reading; read with pread, so its offset is not used.
  int source_fd;
  /// Bytes of the source to deliver.
  int64_t size;
  /// The file is cut into stripes of `stripe_size` bytes; the child writes stripes number
  /// `stripe_index`, `stripe_index + stripe_count`, … (e.g. index 1 of 2: the odd ones).
  int64_t stripe_size;
  int stripe_index;
  int stripe_count;
  /// A counter from cbd_shared_counter_create the child adds each written stripe's bytes to,
  /// or NULL.
  int64_t *progress;
};

/// Forks a child that writes its stripes of `job` through a connection of its own, and returns
/// the child's PID (or -1 with errno set). Call it on the thread that makes every libsmbclient
/// call (so the library is quiescent) after cbd_smbc_load succeeded.
///
/// The child runs only C: it asks to be SIGKILLed when the forking thread ends
/// (PR_SET_PDEATHSIG) and exits at once if the parent is already gone; names itself
/// "bd-smb-writer" (PR_SET_NAME, what ps shows); gives every signal the
/// host catches its default action back (signals the host ignores stay ignored, except
/// SIGTERM and SIGINT, which always end the writer), ignores SIGPIPE and unblocks every signal; keeps
/// only the source (as fd 3) and /dev/null on 0-2, closing every other descriptor it inherited
/// (the parent's sockets, its libsmbclient connection), so nothing it or libsmbclient prints
/// reaches the parent's output; creates, signs in and frees its own context (debug level 0, log
/// discarded); and ends with _exit(0) on success or _exit(errno) of the first failure (EIO when
/// the library set none, ENODATA when the source is shorter than `size`). It never calls exit().
pid_t cbd_smbc_fork_writer(const struct cbd_smbc_writer *job);

/// The longest URL or record a claim request may carry, in bytes.
#define CBD_CLAIM_MAX_FIELD 65536u

/// What the claim child of a delivery needs.
struct cbd_smbc_claimer {
  /// How to sign in (`login.url` is not used: each request names its file).
  struct cbd_smbc_login login;
  /// The manifest, open for reading and appending (O_RDWR | O_APPEND: cbd_append_record reads
  /// its last byte), with an flock(LOCK_EX) the parent took on
  /// it: the child shares that lock (same open file description) and holds it until it exits,
  /// so a reader that takes the lock waits for the child's last record.
  int record_fd;
  /// The child's end of a SOCK_STREAM socketpair; the parent keeps the other end.
  int socket_fd;
  /// SIGALRM ends the child when it has waited this many seconds for a request, or spent them
  /// on one.
  unsigned bound_seconds;
};

/// Forks the claim child of a delivery and returns its PID (or -1 with errno). Call it on the
/// thread that makes every libsmbclient call, after cbd_smbc_load succeeded.
///
/// The child signs in once (at its first claim) on a connection of its own and then serves
/// one request at a time from `socket_fd` (see cbd_claimer_send): it creates the request's URL
/// with O_CREAT | O_EXCL, appends the request's record to `record_fd` and flushes it
/// (fdatasync), then writes the request's token through the handle of the create (so into the
/// file it created, never into another found by name; a write that fails leaves the file empty
/// and changes no answer) and closes it, and answers with an int32: 0 when it created and
/// recorded the file, EEXIST when the name is taken (by a file or a folder), otherwise the
/// errno of the first failure. The record is appended with cbd_append_record (after a newline
/// when the file ends in a line cut short; cut off again when its write or flush fails). When
/// the record cannot be written it removes the file it created and answers that errno. It
/// exits when the socket reaches its end of file (the parent closed its end, or died), after
/// the request in flight and its record are done, without signing off (the kernel closes its
/// connection; every file it created is closed already).
///
/// The child outlives the parent: a SIGKILL of the parent cannot come between a create and its
/// record. It sets no PR_SET_PDEATHSIG and ignores SIGTERM, SIGINT, SIGHUP and SIGQUIT; it
/// names itself "bd-smb-claim", keeps only `record_fd` (as fd 3), `socket_fd` (as fd 4) and
/// /dev/null on 0-2, keeps the password only in its own memory (wiped when it exits, needed
/// again if the connection has to be made anew), ignores SIGXFSZ (a file size limit fails the
/// record with EFBIG instead of killing it), and is ended by SIGALRM after `bound_seconds`
/// without a request or inside one, except between a successful create and its flushed record
/// (the alarm is off while the record is written, and set again in full for the close and
/// the unlink that follow). A SIGKILL of the child itself (power loss,
/// a kill of the whole process group or cgroup) can still come between a create and its record.
pid_t cbd_smbc_fork_claimer(const struct cbd_smbc_claimer *job);

/// Sends one claim request to a claim child: the percent-encoded smb:// URL to create, the
/// record (one line ending in a newline, `record_length` bytes) and the token to write into
/// the new file (`token_length` bytes, may be 0). Never raises SIGPIPE. Returns 0, EINVAL for a
/// field longer than CBD_CLAIM_MAX_FIELD (or an empty URL), or the errno of the failed send
/// (EPIPE when the child is gone).
int cbd_claimer_send(int socket, const char *url, const char *record, size_t record_length,
    const char *token, size_t token_length);

/// Waits for the answer to the request sent last: 0, EEXIST or the child's errno; -1 when the
/// child ended first (the create may or may not have happened). Blocks: never call it on a
/// Swift cooperative-pool thread.
int cbd_claimer_receive(int socket);

/// Whether the claim child at the other end of `socket` is still there (its end is open); it
/// never writes unasked, so anything to read means it is gone. Does not block.
int cbd_claimer_alive(int socket);

/// Blocks until `child` has exited, without reaping it (waitid with WNOWAIT), so its PID stays
/// reserved until cbd_child_reap: a kill(2) before then never hits another process. Returns 0,
/// or the errno (ECHILD when it is not our child or already reaped). Never call it on a Swift
/// cooperative-pool thread.
int cbd_child_wait_exited(pid_t child);

/// Reaps `child` if it has exited, without blocking: 0 and `*status` = its exit status
/// (0..255), or minus the signal that killed it; EAGAIN while it still runs; otherwise the errno.
int cbd_child_reap(pid_t child, int *status);

/// Whether this process can wait for its children: false when SIGCHLD is ignored or has
/// SA_NOCLDWAIT (the kernel then reaps children itself and their status is lost).
int cbd_children_reapable(void);

/// An int64_t in an anonymous MAP_SHARED mapping (starting at 0), so a forked child's additions
/// are seen by the parent; NULL when mmap fails.
int64_t *cbd_shared_counter_create(void);
/// The counter's value (an acquire load).
int64_t cbd_shared_counter_load(const int64_t *counter);
/// Unmaps a counter from cbd_shared_counter_create.
void cbd_shared_counter_destroy(int64_t *counter);

#endif

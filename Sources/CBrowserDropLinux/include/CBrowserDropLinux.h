#ifndef C_BROWSERDROP_LINUX_H
#define C_BROWSERDROP_LINUX_H

#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/statvfs.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>

/* Thin wrappers over calls that need _GNU_SOURCE or that Glibc's Swift overlay does not export.
   Each returns what the C function returns and leaves errno as the C function left it. */

int cbd_epoll_create(void);
int cbd_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t data);
/* Waits for events; writes up to max (events, data) pairs. */
int cbd_epoll_wait(int epfd, uint32_t *events, uint64_t *data, int max, int timeout_ms);

int cbd_eventfd(void);
int cbd_eventfd_signal(int fd);
int cbd_eventfd_drain(int fd);

int cbd_accept(int fd);
int cbd_pipe(int fds[2]);
int cbd_set_pipe_size(int fd, int size);
ssize_t cbd_splice(int fd_in, int64_t *off_in, int fd_out, int64_t *off_out, size_t len, int more);
/* Starts writing the dirty pages of fd's bytes [offset, offset + length) to disk and returns
   without waiting for them (sync_file_range with SYNC_FILE_RANGE_WRITE only): a later fdatasync
   then finds most of the file already written. 0, or -1 with errno. */
int cbd_start_writeback(int fd, int64_t offset, int64_t length);

/* Free bytes for unprivileged users on the volume holding path (statvfs f_bavail * f_frsize). */
int cbd_free_bytes(const char *path, uint64_t *free_bytes);

/* Renames from to to, failing with EEXIST when to exists (renameat2 RENAME_NOREPLACE). Fails
   with EINVAL or ENOSYS where the file system or kernel can't do that. */
int cbd_renameat2_noreplace(const char *from, const char *to);

/* Appends `record` (one line, ending in a newline) to fd, open O_RDWR | O_APPEND, and flushes it
   (fdatasync); returns 0, or the errno of the first failure with *failed_call naming the call
   ("fstat", "pread", "write", "fdatasync"). A file that does not end with a newline (a record
   cut short by a crash) gets one first, so the two are never read as one line. On any failure
   the file is cut back to its size before the call (ftruncate, then fdatasync), but only while
   it ends exactly with this call's bytes, so another writer's line is never cut: after a
   failure no part of the record, and no whole record whose flush failed, stays in the file.
   Retries EINTR. Used by the SMB claim child too, so it calls nothing but the kernel. */
int cbd_append_record(int fd, const void *record, size_t length, const char **failed_call);

/* Names the calling thread (up to 15 bytes) for ps, perf and gdb. */
void cbd_set_thread_name(const char *name);

/* Sets the calling thread's signal mask to every asynchronous signal (all but the fault
   signals), so a library's own threads never take a signal meant for the host program's handler,
   and a fault in them is still reported. */
void cbd_block_async_signals(void);

/* Routes the given signals to a pipe and returns its read end (or -1 with errno): each signal
   that arrives writes one byte, its number. The handler is async-signal-safe and works on
   whichever thread the kernel picks, so nothing depends on which threads block what. Call once
   per process. */
int cbd_route_signals_to_pipe(const int *signals, int count);

/* Hands free heap memory back to the kernel (glibc malloc_trim); returns 1 when some was. */
int cbd_release_free_memory(void);

/* Makes glibc serve every allocation of at least `bytes` with its own mapping, returned to the
   kernel when freed, instead of raising that threshold as large blocks come and go (its default):
   a long-running process then cannot strand big freed blocks inside its heap. Returns 1 on
   success (mallopt M_MMAP_THRESHOLD). */
int cbd_map_large_allocations(int bytes);

/* Interface flags, so Swift does not need net/if.h's macros. */
int cbd_iff_up(void);
int cbd_iff_running(void);
int cbd_iff_loopback(void);
int cbd_iff_pointopoint(void);

/* O_TMPFILE, a compound macro Swift does not import. */
int cbd_o_tmpfile(void);

int cbd_epollin(void);
int cbd_epollout(void);
int cbd_epollrdhup(void);
int cbd_epollet(void);
int cbd_epollhup(void);
int cbd_epollerr(void);

#endif

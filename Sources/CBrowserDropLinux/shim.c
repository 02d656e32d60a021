#define _GNU_SOURCE
#include "CBrowserDropLinux.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>

int cbd_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int cbd_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t data) {
  struct epoll_event ev = {.events = events, .data = {.u64 = data}};
  return epoll_ctl(epfd, op, fd, &ev);
}

int cbd_epoll_wait(int epfd, uint32_t *events, uint64_t *data, int max, int timeout_ms) {
  struct epoll_event evs[256];
  if (max > 256) max = 256;
  int n = epoll_wait(epfd, evs, max, timeout_ms);
  for (int i = 0; i < n; i++) {
    events[i] = evs[i].events;
    data[i] = evs[i].data.u64;
  }
  return n;
}

int cbd_eventfd(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

int cbd_eventfd_signal(int fd) {
  uint64_t one = 1;
  return (int)write(fd, &one, sizeof one);
}

int cbd_eventfd_drain(int fd) {
  uint64_t value;
  return (int)read(fd, &value, sizeof value);
}

int cbd_accept(int fd) { return accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC); }

int cbd_pipe(int fds[2]) { return pipe2(fds, O_CLOEXEC | O_NONBLOCK); }

int cbd_set_pipe_size(int fd, int size) { return fcntl(fd, F_SETPIPE_SZ, size); }

ssize_t cbd_splice(int fd_in, int64_t *off_in, int fd_out, int64_t *off_out, size_t len, int more) {
  unsigned int flags = SPLICE_F_MOVE | SPLICE_F_NONBLOCK | (more ? SPLICE_F_MORE : 0);
  return splice(fd_in, (loff_t *)off_in, fd_out, (loff_t *)off_out, len, flags);
}

int cbd_start_writeback(int fd, int64_t offset, int64_t length) {
  return sync_file_range(fd, (off64_t)offset, (off64_t)length, SYNC_FILE_RANGE_WRITE);
}

int cbd_free_bytes(const char *path, uint64_t *free_bytes) {
  struct statvfs s;
  int rc = statvfs(path, &s);
  if (rc == 0) *free_bytes = (uint64_t)s.f_bavail * (uint64_t)s.f_frsize;
  return rc;
}

int cbd_renameat2_noreplace(const char *from, const char *to) {
  return renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE);
}

int cbd_iff_up(void) { return IFF_UP; }
int cbd_iff_running(void) { return IFF_RUNNING; }
int cbd_iff_loopback(void) { return IFF_LOOPBACK; }
int cbd_iff_pointopoint(void) { return IFF_POINTOPOINT; }

int cbd_epollin(void) { return EPOLLIN; }
int cbd_epollout(void) { return EPOLLOUT; }
int cbd_o_tmpfile(void) { return O_TMPFILE; }
int cbd_epollrdhup(void) { return EPOLLRDHUP; }
int cbd_epollet(void) { return EPOLLET; }
int cbd_epollhup(void) { return EPOLLHUP; }
int cbd_epollerr(void) { return EPOLLERR; }

void cbd_set_thread_name(const char *name) { pthread_setname_np(pthread_self(), name); }

void cbd_block_async_signals(void) {
  sigset_t set;
  sigfillset(&set);
  static const int faults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS};
  for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) sigdelset(&set, faults[i]);
  pthread_sigmask(SIG_SETMASK, &set, NULL);
}

static int cbd_signal_pipe = -1;

static void cbd_write_signal(int number) {
  int saved = errno;
  unsigned char byte = (unsigned char)number;
  /* Non-blocking: if 64 KiB of unread signals ever piled up, dropping one more is harmless. */
  ssize_t written = write(cbd_signal_pipe, &byte, 1);
  (void)written;
  errno = saved;
}

int cbd_route_signals_to_pipe(const int *signals, int count) {
  if (cbd_signal_pipe >= 0) {
    errno = EBUSY;
    return -1;
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -1;
  if (fcntl(fds[1], F_SETFL, O_NONBLOCK) != 0) {
    int saved = errno;
    close(fds[0]);
    close(fds[1]);
    errno = saved;
    return -1;
  }
  cbd_signal_pipe = fds[1];
  struct sigaction action = {0};
  action.sa_handler = cbd_write_signal;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  for (int i = 0; i < count; i++) {
    if (sigaction(signals[i], &action, NULL) != 0) return -1;
  }
  return fds[0];
}

int cbd_release_free_memory(void) { return malloc_trim(0); }

int cbd_map_large_allocations(int bytes) { return mallopt(M_MMAP_THRESHOLD, bytes); }

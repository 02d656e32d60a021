/* A small HTTP upload load generator for BrowserDrop's benchmark (W2 and W3).
 *
 *   loadclient PORT COUNT SIZE PARALLEL PREFIX [SOURCE_FILE]
 *
 * PARALLEL threads take upload numbers from a shared counter; each upload opens a new
 * connection to 127.0.0.1:PORT, sends `POST /upload?path=PREFIX<n>.bin` with SIZE bytes (from
 * SOURCE_FILE with sendfile, or from a random buffer in memory) and reads the reply.
 * Prints one JSON line: elapsed seconds, uploads that got 2xx, errors, latency percentiles.
 * Bounded: COUNT uploads, a 120 s deadline after which no upload starts, 30 s socket timeouts.
 *
 *   loadclient local:DIR|local-sync:DIR|local-ordered:DIR COUNT SIZE PARALLEL PREFIX
 *
 * The disk's own limit for the same work, without the network: each "upload" is an
 * open/write/close of DIR/PREFIX<n>.bin, with `fdatasync` before the close in local-sync.
 * That is the harness's durable limit row (../shared/bench, W2): it orders nothing (the name
 * and the data reach the disk in one flush), which a server that never shows a partial file
 * under its final name can't do. local-ordered is that server's order without the server: an
 * O_TMPFILE file written and `fdatasync`ed, then linked as DIR/PREFIX<n>.bin, then DIR flushed
 * with group commit (a flush covers every link made before it started; one at a time).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include "loadcommon.h" /* now, send_all, connect_local, upload_head, read_status */

static int port, count, parallel, source_fd = -1, local_sync, local_ordered, local_dir_fd = -1;
static const char *local_dir;
static long long size;
static const char *prefix;
static unsigned char *memory_body;
static atomic_int next_upload, ok_count, error_count;
static double *latencies, started, deadline;

/* Group commit of the folder flush: a request joins the next flush not yet started. */
static pthread_mutex_t flush_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t flush_done = PTHREAD_COND_INITIALIZER;
static long flush_requested, flush_covered, flush_running, flush_failed_upto;

static int flush_folder(void) {
  pthread_mutex_lock(&flush_lock);
  long mine = ++flush_requested;
  while (flush_covered < mine) {
    if (flush_running) { pthread_cond_wait(&flush_done, &flush_lock); continue; }
    flush_running = 1;
    long covers = flush_requested;
    pthread_mutex_unlock(&flush_lock);
    int failed = fsync(local_dir_fd) != 0;
    pthread_mutex_lock(&flush_lock);
    if (failed) flush_failed_upto = covers;
    flush_covered = covers;
    flush_running = 0;
    pthread_cond_broadcast(&flush_done);
  }
  int ok = flush_failed_upto < mine;
  pthread_mutex_unlock(&flush_lock);
  return ok;
}

/* Writes the in-memory body to fd; returns the bytes written (short on an error). */
static ssize_t write_body(int fd) {
  ssize_t written = 0;
  while (written < size) {
    ssize_t n2 = write(fd, memory_body + written, (size_t)(size - written));
    if (n2 < 0 && errno == EINTR) continue;
    if (n2 <= 0) break;
    written += n2;
  }
  return written;
}

static int write_ordered(int n) {
  int fd = open(local_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  ssize_t written = write_body(fd);
  char name[512];
  snprintf(name, sizeof name, "%s%05d.bin", prefix, n);
  int ok = written == size && fdatasync(fd) == 0 && linkat(fd, "", local_dir_fd, name, AT_EMPTY_PATH) == 0;
  close(fd);
  return ok && flush_folder() ? 201 : -1;
}

static int write_local(int n) {
  if (local_ordered) return write_ordered(n);
  char path[4096];
  snprintf(path, sizeof path, "%s/%s%05d.bin", local_dir, prefix, n);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  ssize_t written = write_body(fd);
  int ok = written == size && (!local_sync || fdatasync(fd) == 0);
  close(fd);
  return ok ? 201 : -1;
}

static int upload(int n) {
  if (local_dir) return write_local(n);
  int fd = connect_local(port);
  if (fd < 0) return -1;
  char head[512];
  int length = upload_head(head, sizeof head, prefix, n, port, size);
  int sent = send_all(fd, head, (size_t)length);
  if (sent == 0 && source_fd >= 0) {
    off_t offset = 0;
    while (offset < size) {
      ssize_t moved = sendfile(fd, source_fd, &offset, (size_t)(size - offset));
      if (moved < 0 && errno == EINTR) continue;
      if (moved <= 0) { sent = -1; break; }
    }
  } else if (sent == 0) {
    sent = send_all(fd, memory_body, (size_t)size);
  }
  int status = sent == 0 ? read_status(fd) : -1;
  close(fd);
  return status;
}

static void *worker(void *unused) {
  (void)unused;
  for (;;) {
    int n = atomic_fetch_add(&next_upload, 1);
    if (n >= count || now() > deadline) break;
    double t0 = now();
    int status = upload(n);
    latencies[n] = now() - t0;
    if (status >= 200 && status < 300) atomic_fetch_add(&ok_count, 1);
    else atomic_fetch_add(&error_count, 1);
  }
  return NULL;
}

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: loadclient PORT|local:DIR|local-sync:DIR|local-ordered:DIR COUNT SIZE PARALLEL PREFIX [SOURCE_FILE]\n");
    return 2;
  }
  if (strncmp(argv[1], "local:", 6) == 0) local_dir = argv[1] + 6;
  if (strncmp(argv[1], "local-sync:", 11) == 0) local_dir = argv[1] + 11, local_sync = 1;
  if (strncmp(argv[1], "local-ordered:", 14) == 0) local_dir = argv[1] + 14, local_ordered = 1;
  if (local_dir && (local_dir_fd = open(local_dir, O_RDONLY | O_DIRECTORY)) < 0) { perror(local_dir); return 2; }
  port = local_dir ? 0 : atoi(argv[1]);
  count = atoi(argv[2]);
  size = atoll(argv[3]);
  parallel = atoi(argv[4]);
  prefix = argv[5];
  if (argc > 6 && !local_dir && (source_fd = open(argv[6], O_RDONLY)) < 0) { perror(argv[6]); return 2; }
  if (source_fd < 0) {
    memory_body = malloc((size_t)size + 1);
    for (long long i = 0; i < size; i++) memory_body[i] = (unsigned char)(rand() >> 7);
  }
  latencies = calloc((size_t)count, sizeof(double));
  pthread_t threads[256];
  if (parallel > 256) parallel = 256;
  started = now();
  deadline = started + 120;
  for (int i = 0; i < parallel; i++) pthread_create(&threads[i], NULL, worker, NULL);
  for (int i = 0; i < parallel; i++) pthread_join(threads[i], NULL);
  double elapsed = now() - started;
  int done = atomic_load(&ok_count) + atomic_load(&error_count);
  qsort(latencies, (size_t)done, sizeof(double), compare);
  printf("{\"elapsed\": %.6f, \"ok\": %d, \"errors\": %d, \"p50_ms\": %.3f, \"p99_ms\": %.3f}\n",
         elapsed, atomic_load(&ok_count), atomic_load(&error_count),
         done ? latencies[done / 2] * 1000 : 0, done ? latencies[(done * 99) / 100] * 1000 : 0);
  return atomic_load(&error_count) ? 1 : 0;
}

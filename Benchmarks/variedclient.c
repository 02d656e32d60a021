/* W2 with a different random body for every upload, as the peers harness (../shared/bench) sends
 * it, unlike loadclient.c, which sends one random body COUNT times.
 *
 *   variedclient PORT COUNT SIZE PARALLEL PREFIX [SEED]
 *
 * PARALLEL threads take upload numbers from a shared counter; upload n opens a new connection
 * to 127.0.0.1:PORT and sends `POST /upload?path=PREFIX<n>.bin` with SIZE bytes generated from
 * SEED and n (xorshift64*; the same SEED gives the same bodies, so two builds can be compared
 * on the same data). Prints one JSON line: elapsed seconds, uploads that got 2xx, errors.
 * Bounded: COUNT uploads, a 120 s deadline after which no upload starts, 30 s socket timeouts.
 * Only 127.0.0.1 is contacted.
 *
 * Build: cc -O2 -pthread -o variedclient Benchmarks/variedclient.c
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loadcommon.h" /* now, send_all, connect_local, upload_head, read_status */

static int port, count, parallel;
static long long size;
static const char *prefix;
static uint64_t seed;
static atomic_int next_upload, ok_count, error_count;
static double deadline;

/* Upload n's body: xorshift64* from a state that mixes SEED and n. */
static void fill(unsigned char *body, int n) {
  uint64_t state = (seed ^ ((uint64_t)n * 0x9E3779B97F4A7C15ULL)) | 1;
  for (long long i = 0; i < size; i += 8) {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    uint64_t word = state * 0x2545F4914F6CDD1DULL;
    long long left = size - i < 8 ? size - i : 8;
    memcpy(body + i, &word, (size_t)left);
  }
}

static int upload(int n, unsigned char *body) {
  int fd = connect_local(port);
  if (fd < 0) return -1;
  char head[512];
  int length = upload_head(head, sizeof head, prefix, n, port, size);
  fill(body, n);
  int status = -1;
  if (send_all(fd, head, (size_t)length) == 0 && send_all(fd, body, (size_t)size) == 0)
    status = read_status(fd);
  close(fd);
  return status;
}

static void *worker(void *unused) {
  (void)unused;
  unsigned char *body = malloc((size_t)size + 8);
  if (body == NULL) return NULL;
  for (;;) {
    int n = atomic_fetch_add(&next_upload, 1);
    if (n >= count || now() > deadline) break;
    int status = upload(n, body);
    if (status >= 200 && status < 300) atomic_fetch_add(&ok_count, 1);
    else atomic_fetch_add(&error_count, 1);
  }
  free(body);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: variedclient PORT COUNT SIZE PARALLEL PREFIX [SEED]\n");
    return 2;
  }
  port = atoi(argv[1]);
  count = atoi(argv[2]);
  size = atoll(argv[3]);
  parallel = atoi(argv[4]);
  prefix = argv[5];
  seed = argc > 6 ? strtoull(argv[6], NULL, 0) : 1;
  if (parallel < 1) parallel = 1;
  if (parallel > 64) parallel = 64;
  pthread_t threads[64];
  double started = now();
  deadline = started + 120;
  for (int i = 0; i < parallel; i++) pthread_create(&threads[i], NULL, worker, NULL);
  for (int i = 0; i < parallel; i++) pthread_join(threads[i], NULL);
  printf("{\"elapsed\": %.6f, \"ok\": %d, \"errors\": %d}\n", now() - started,
         atomic_load(&ok_count), atomic_load(&error_count));
  return atomic_load(&error_count) ? 1 : 0;
}

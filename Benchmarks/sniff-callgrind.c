/*
 * Instructions libmagic spends per call on random data, counted with callgrind (repeatable on a
 * loaded machine). Benchmarks/sniff-callgrind.sh builds and runs it.
 *
 *   sniff-callgrind MODE DATABASE COUNT LENGTH
 *
 * MODE whole: the sniffer's handle before the screen (the system database, the sniffer's flags).
 * MODE small: a handle as ResidualLibmagic opens one: DATABASE (a part the screen built), the
 *             encoding and text passes off.
 * MODE nosoft: as small, with the soft-magic pass off too (what every call costs at least).
 * Only run_one is counted (--toggle-collect=run_one): filling the buffers is not.
 */
#include <magic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FLAGS (MAGIC_MIME_TYPE | MAGIC_MIME_ENCODING | MAGIC_NO_CHECK_COMPRESS | \
    MAGIC_NO_COMPRESS_FORK | MAGIC_NO_CHECK_ELF | MAGIC_NO_CHECK_APPTYPE | MAGIC_RAW)

static uint64_t state = 88172645463325252ull;

static uint64_t next(void) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

__attribute__((noinline)) const char *run_one(magic_t cookie, const void *bytes, size_t length) {
  return magic_buffer(cookie, bytes, length);
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s whole|small|nosoft DATABASE COUNT LENGTH\n", argv[0]);
    return 2;
  }
  int whole = strcmp(argv[1], "whole") == 0;
  int flags = FLAGS;
  if (!whole) flags |= MAGIC_NO_CHECK_ENCODING | MAGIC_NO_CHECK_TEXT;
  if (strcmp(argv[1], "nosoft") == 0) flags |= MAGIC_NO_CHECK_SOFT;
  magic_t cookie = magic_open(flags);
  if (cookie == NULL || magic_load(cookie, whole ? NULL : argv[2]) != 0) {
    fprintf(stderr, "cannot load %s: %s\n", argv[2], cookie ? magic_error(cookie) : "no memory");
    return 1;
  }
  size_t count = strtoul(argv[3], NULL, 10), length = strtoul(argv[4], NULL, 10);
  unsigned char *bytes = malloc(count * length + 8);
  for (size_t index = 0; index < count * length; index += 8) {
    uint64_t word = next();
    memcpy(bytes + index, &word, 8);
  }
  size_t unknown = 0;
  for (size_t index = 0; index < count; index++) {
    const char *answer = run_one(cookie, bytes + index * length, length);
    if (answer && strcmp(answer, "application/octet-stream; charset=binary") == 0) unknown++;
  }
  printf("%zu of %zu answered application/octet-stream\n", unknown, count);
  free(bytes);
  magic_close(cookie);
  return 0;
}

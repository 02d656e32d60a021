/* What the upload load clients (loadclient.c, variedclient.c) share: the monotonic clock, a send
 * that writes everything, and one upload's HTTP exchange with 127.0.0.1 (connect with 30 s
 * timeouts, the request head, the reply's status). Static inline: each client compiles its own
 * copy, so the build stays `cc -O2 -pthread -o CLIENT Benchmarks/CLIENT.c` (the header is found
 * beside the .c file).
 */
#ifndef BROWSERDROP_BENCHMARKS_LOADCOMMON_H
#define BROWSERDROP_BENCHMARKS_LOADCOMMON_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static inline double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static inline int send_all(int fd, const void *data, size_t length) {
  const char *p = data;
  while (length > 0) {
    ssize_t n = send(fd, p, length, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    length -= (size_t)n;
  }
  return 0;
}

/* A TCP connection to 127.0.0.1:port with 30 s send and receive timeouts, or -1. */
static inline int connect_local(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  struct timeval timeout = {30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Writes upload n's request head (`POST /upload?path=PREFIX<n>.bin`, SIZE bytes of body, the
 * connection closed after the reply) into head; returns its length. */
static inline int upload_head(char *head, size_t capacity, const char *prefix, int n, int port,
                              long long size) {
  return snprintf(head, capacity,
                  "POST /upload?path=%s%05d.bin HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                  "Origin: http://127.0.0.1:%d\r\nContent-Type: application/octet-stream\r\n"
                  "Content-Length: %lld\r\nConnection: close\r\n\r\n",
                  prefix, n, port, port, size);
}

/* Reads the reply (its first KiB, until the server closes or a timeout); returns its HTTP status,
 * or -1. */
static inline int read_status(int fd) {
  char reply[1024];
  ssize_t got = 0, n2;
  while ((n2 = recv(fd, reply + got, sizeof reply - 1 - (size_t)got, 0)) > 0) {
    got += n2;
    if (got >= (ssize_t)sizeof reply - 1) break;
  }
  reply[got > 0 ? got : 0] = 0;
  if (got > 12 && strncmp(reply, "HTTP/1.1 ", 9) == 0) return atoi(reply + 9);
  return -1;
}

#endif

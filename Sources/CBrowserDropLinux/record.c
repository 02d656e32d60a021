#define _GNU_SOURCE
#include "CBrowserDropLinux.h"

#include <errno.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* In C, not Swift, because its second caller is the SMB claim child, which runs only C (see
   CSMBClientLoader's claimer_claim); Durable.append is the first. */
int cbd_append_record(int fd, const void *record, size_t length, const char **failed_call) {
  static const char newline = '\n';
  *failed_call = "";
  struct stat info;
  if (fstat(fd, &info) != 0) {
    *failed_call = "fstat";
    return errno;
  }
  const off_t old = info.st_size;
  /* A record cut short by a crash (or by a writer that could not undo its part) has no newline:
     this one must not be glued to it, or a reader would skip both. */
  char last = '\n';
  if (old > 0) {
    ssize_t got;
    do got = pread(fd, &last, 1, old - 1);
    while (got < 0 && errno == EINTR);
    if (got < 0) {
      *failed_call = "pread";
      return errno;
    }
    if (got == 0) last = '\n'; /* shrank meanwhile: nothing to separate from */
  }
  const size_t lead = last == '\n' ? 0 : 1;
  const size_t total = lead + length;
  size_t written = 0;
  int code = 0;
  while (written < total) {
    struct iovec parts[2];
    int count = 0;
    if (written < lead) parts[count++] = (struct iovec){(void *)&newline, 1};
    size_t from = written > lead ? written - lead : 0;
    if (from < length) {
      parts[count++] = (struct iovec){(char *)record + from, length - from};
    }
    ssize_t done = writev(fd, parts, count);
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) {
      code = done < 0 ? errno : EIO;
      *failed_call = "write";
      break;
    }
    written += (size_t)done;
  }
  while (code == 0 && fdatasync(fd) != 0) {
    if (errno != EINTR) {
      code = errno;
      *failed_call = "fdatasync";
    }
  }
  if (code == 0) return 0;
  /* Undo this call's bytes: a part would glue the next record to it, and a whole record whose
     flush failed may still reach the disk after its caller has acted on the failure (the claim
     child then removes the file the record names). Only while the file ends exactly with what
     this call wrote (O_APPEND put it at the end), so a line another writer appended meanwhile
     is never cut. */
  if (written > 0 && fstat(fd, &info) == 0 && info.st_size == old + (off_t)written) {
    int cut;
    do cut = ftruncate(fd, old);
    while (cut != 0 && errno == EINTR);
    if (cut == 0) {
      while (fdatasync(fd) != 0 && errno == EINTR) {
      }
    }
  }
  return code;
}

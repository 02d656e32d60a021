"""A case-insensitive, case-preserving file system over a folder, in FUSE, for the tests of the
staging volume's case probe (Tests/BrowserDropTests/CaseInsensitiveVolumeTests.swift). This
kernel has no casefolding file system of its own (no CONFIG_UNICODE, no XFS ascii-ci), so the
tests mount this one. Names are looked up the way a Mac's volume does: an existing entry whose
name differs only in case is that entry.

    /usr/bin/python3 casefold_fs.py BACKING MOUNTPOINT     (Debian's python3-fusepy, as root)

It runs in the foreground until the mount point is unmounted.
"""

import errno
import os
import sys

from fusepy import FUSE, FuseOSError, Operations


class CaseFolding(Operations):
    def __init__(self, backing):
        self.backing = os.path.realpath(backing)

    def real(self, path):
        """The backing path of `path`, each name matched without regard to case."""
        current = self.backing
        for name in [part for part in path.split("/") if part]:
            candidate = os.path.join(current, name)
            if not os.path.lexists(candidate) and os.path.isdir(current):
                folded = name.casefold()
                for entry in os.listdir(current):
                    if entry.casefold() == folded:
                        candidate = os.path.join(current, entry)
                        break
            current = candidate
        return current

    def getattr(self, path, fh=None):
        try:
            info = os.lstat(self.real(path))
        except OSError as error:
            raise FuseOSError(error.errno)
        return {key: getattr(info, key) for key in (
            "st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_atime", "st_mtime",
            "st_ctime", "st_ino")}

    def access(self, path, mode):
        if not os.access(self.real(path), mode, follow_symlinks=False):
            raise FuseOSError(errno.EACCES)

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(self.real(path))

    def readlink(self, path):
        return os.readlink(self.real(path))

    def mkdir(self, path, mode):
        os.mkdir(self.real(path), mode)

    def rmdir(self, path):
        os.rmdir(self.real(path))

    def unlink(self, path):
        os.unlink(self.real(path))

    def symlink(self, target, source):
        os.symlink(source, self.real(target))

    def link(self, target, source):
        os.link(self.real(source), self.real(target))

    def rename(self, old, new):
        os.rename(self.real(old), self.real(new))

    def chmod(self, path, mode):
        os.chmod(self.real(path), mode, follow_symlinks=False)

    def chown(self, path, uid, gid):
        os.chown(self.real(path), uid, gid, follow_symlinks=False)

    def utimens(self, path, times=None):
        os.utime(self.real(path), times, follow_symlinks=False)

    def truncate(self, path, length, fh=None):
        os.truncate(self.real(path), length)

    def statfs(self, path):
        info = os.statvfs(self.real(path))
        return {key: getattr(info, key) for key in (
            "f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files",
            "f_flag", "f_frsize", "f_namemax")}

    def create(self, path, mode, fi=None):
        return os.open(self.real(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)

    def open(self, path, flags):
        return os.open(self.real(path), flags & ~(os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW))

    def read(self, path, size, offset, fh):
        return os.pread(fh, size, offset)

    def write(self, path, data, offset, fh):
        return os.pwrite(fh, data, offset)

    def flush(self, path, fh):
        return 0

    def fsync(self, path, datasync, fh):
        os.fdatasync(fh) if datasync else os.fsync(fh)
        return 0

    def fsyncdir(self, path, datasync, fh):
        return 0

    def release(self, path, fh):
        os.close(fh)
        return 0


if __name__ == "__main__":
    FUSE(CaseFolding(sys.argv[1]), sys.argv[2], foreground=True, nothreads=True)

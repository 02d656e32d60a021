#!/bin/sh
# A real systemd as PID 1 of a PID, mount and cgroup namespace of Tests/Operations/test_systemd.py.
#   systemd_ns.sh CGROUP UNITS VAR CONSOLE TARGET
# CGROUP  a cgroup2 folder the test made for this namespace (in the host's cgroup2 hierarchy,
#         here /sys/fs/cgroup/unified); this script moves itself there, so the namespace's
#         cgroup tree is that folder.
# UNITS   the test's unit folder, shown as /etc/systemd/system inside.
# VAR     the test's folder shown as /var inside (state folders of the services).
# CONSOLE a terminal (the test's pty) shown as /dev/console: systemd's own log lines go there.
# TARGET  the unit systemd starts (--unit=).
# Inside: / read-only, /run and /tmp new tmpfs, a /dev of its own, a cgroup2 mount of the
# namespace's tree alone on /sys/fs/cgroup, /sys and /proc/sys read-only. Nothing the host sees
# changes but CGROUP and what the services write under VAR. The network is the host's (the
# kiosk listens on 127.0.0.1 only). Killing the namespace's PID 1 (or this script's unshare)
# ends every process in it.
set -eu
if [ "${1-}" != inside ]; then
  echo $$ >"$1/cgroup.procs"
  exec unshare --pid --fork --kill-child=SIGKILL --mount --propagation private --cgroup \
    --mount-proc -- "$0" inside "$@"
fi
shift
units=$2 var=$3 console=$4 target=$5

# A /dev of its own: the usual nodes bound from the host's, a devpts instance, the console.
mount -t tmpfs -o mode=0755,nosuid,size=1m tmpfs /run
mkdir /run/.dev
mount -t tmpfs -o mode=0755,nosuid,size=1m tmpfs /run/.dev
for node in null zero full random urandom tty; do
  touch "/run/.dev/$node"
  mount --bind "/dev/$node" "/run/.dev/$node"
done
touch /run/.dev/console
mount --bind "$console" /run/.dev/console
mkdir /run/.dev/pts /run/.dev/shm
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts /run/.dev/pts
ln -s pts/ptmx /run/.dev/ptmx
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /run/.dev/shm
ln -s /proc/self/fd /run/.dev/fd
ln -s /proc/self/fd/0 /run/.dev/stdin
ln -s /proc/self/fd/1 /run/.dev/stdout
ln -s /proc/self/fd/2 /run/.dev/stderr
mount --move /run/.dev /dev
rmdir /run/.dev

mount --bind "$units" /etc/systemd/system
# Debian's /var/run and /var/lock are links into /run; PrivateTmp= wants /var/tmp.
mkdir -p "$var/tmp" "$var/lib"
chmod 1777 "$var/tmp"
ln -sfn /run "$var/run"
ln -sfn /run/lock "$var/lock"
mount --bind "$var" /var
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /tmp

# The cgroup tree: this namespace's root is CGROUP, and only it is mounted.
umount -R /sys/fs/cgroup
mount -o remount,bind,ro /sys
mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 /sys/fs/cgroup
# unshare's own process (outside the PID namespace) stays at the root; systemd's tree is a
# child, so systemd finds no process there it can't move.
mkdir /sys/fs/cgroup/payload
echo $$ >/sys/fs/cgroup/payload/cgroup.procs
mount --bind /proc/sys /proc/sys
mount -o remount,bind,ro /proc/sys
mount -o remount,bind,ro /

# Without these capabilities systemd can't load kernel modules (it tries autofs4), set the
# clock, write the kernel log or audit records, or change the host's network.
dropped=-sys_module,-sys_time,-sys_rawio,-syslog,-net_admin,-audit_write,-audit_control
dropped=$dropped,-audit_read,-wake_alarm,-block_suspend,-mac_admin,-mac_override
exec env -i container=browserdrop-test PATH=/usr/sbin:/usr/bin:/sbin:/bin \
  setpriv --bounding-set "$dropped" \
  /lib/systemd/systemd --log-target=console --log-level=debug --log-color=no --show-status=no \
  --unit="$target"

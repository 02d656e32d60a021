#!/bin/sh
# One test host of Tests/Operations/test_avahi.py, run inside its network namespace and a mount
# namespace of its own (`ip netns exec NS unshare --mount --propagation private lan_host.sh …`):
# a tmpfs on /run, so the system D-Bus and avahi-daemon started here are this host's alone, on
# the host's veth end only. SIGTERM stops both (by their PIDs) and ends the script.
#   lan_host.sh INTERFACE AVAHI-HOST-NAME SCRATCH-DIR
set -eu
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p /run/dbus /run/avahi-daemon
ip link set lo up
cat > "$3/avahi.conf" <<CONF
[server]
host-name=$2
use-ipv4=yes
use-ipv6=no
allow-interfaces=$1
enable-dbus=yes
[wide-area]
enable-wide-area=no
[publish]
publish-hinfo=no
publish-workstation=no
CONF
dbus-daemon --system --nofork --nopidfile &
dbus=$!
# dbus-daemon has no readiness signal but its socket; avahi-daemon gives up without it.
for _ in $(seq 1 200); do [ -S /run/dbus/system_bus_socket ] && break; sleep 0.05; done
avahi-daemon --file="$3/avahi.conf" --no-drop-root --no-chroot --no-rlimits --no-proc-title &
avahi=$!
trap 'kill "$avahi" 2>/dev/null || true; wait "$avahi" || true; kill "$dbus"; wait "$dbus" || true; exit 0' TERM
# avahi-daemon writes "Server startup complete" to standard error when it is ready.
wait

#!/usr/bin/env bash
# A self-contained smbd on 127.0.0.1 for the forwarding tests and benchmark.
#
#   BASE=/tmp/smbd PORT=4445 scripts/smbd.sh up     # start, return once a share answers
#   BASE=/tmp/smbd PORT=4445 scripts/smbd.sh down   # stop by PID, clean up
#
# Shares: guest (guest, writable), private (user dropper, password s3cret), tiny (guest, a
# 20 MiB tmpfs), ro (guest, read-only). Everything lives under $BASE; /etc/samba is never read.
# Recipe and pitfalls: ../shared/notes/smb.md. Must run as root (useradd, mount, smbd uid switch).
set -euo pipefail

: "${BASE:?set BASE to a scratch directory}"
: "${PORT:?set PORT to a free TCP port}"
CONF="$BASE/smb.conf"
PIDFILE="$BASE/smbd.harness.pid"

log() { printf 'smbd.sh: %s\n' "$*" >&2; }

install_samba_if_missing() {
  if [[ -x /usr/sbin/smbd && -x /usr/bin/smbclient ]] && pkg-config --exists smbclient; then
    return
  fi
  log "installing samba smbclient libsmbclient-dev"
  apt-get -o DPkg::Lock::Timeout=900 update -qq
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq \
    samba smbclient libsmbclient-dev >/dev/null
}

write_config() {
  cat >"$CONF" <<EOF
[global]
   server role = standalone server
   workgroup = WORKGROUP
   netbios name = TESTSMBD
   interfaces = 127.0.0.1
   bind interfaces only = yes
   smb ports = $PORT
   disable netbios = yes
   lock directory = $BASE/lock
   state directory = $BASE/state
   cache directory = $BASE/cache
   private dir = $BASE/private
   pid directory = $BASE/pid
   ncalrpc dir = $BASE/ncalrpc
   log file = $BASE/log/log.%m
   max log size = 0
   passdb backend = tdbsam:$BASE/private/passdb.tdb
   map to guest = Bad User
   guest account = nobody
   load printers = no
   printing = bsd
   printcap name = /dev/null
   disable spoolss = yes
   usershare max shares = 0
   map archive = no

[guest]
   path = $BASE/shares/guest
   read only = no
   guest ok = yes
   guest only = yes

[private]
   path = $BASE/shares/private
   read only = no
   valid users = dropper

[tiny]
   path = $BASE/shares/tiny
   read only = no
   guest ok = yes
   guest only = yes

[ro]
   path = $BASE/shares/ro
   read only = yes
   guest ok = yes
EOF
}

wait_for_tcp() {
  local deadline=$((SECONDS + 15))
  while ! (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; do
    if ! kill -0 "$1" 2>/dev/null; then
      log "smbd exited during start; see $BASE/log/smbd.out"
      return 1
    fi
    if ((SECONDS >= deadline)); then
      log "smbd did not accept TCP on 127.0.0.1:$PORT within 15 s"
      return 1
    fi
    sleep 0.05
  done
}

up() {
  if [[ "$(id -u)" != 0 ]]; then
    log "must run as root (useradd, mount, smbd)"
    exit 1
  fi
  install_samba_if_missing
  if [[ -n "$(ss -ltnH "sport = :$PORT")" ]]; then
    # smbd listens with SO_REUSEPORT: a second one would silently share the port.
    log "port $PORT is already in use; choose another PORT"
    exit 1
  fi
  if [[ -f "$PIDFILE" ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    log "an smbd from this BASE is already running (pid $(cat "$PIDFILE"))"
    exit 1
  fi
  mkdir -p "$BASE"/{lock,state,cache,private,pid,ncalrpc,log}
  chmod o+x "$BASE"  # smbd serves guests as nobody, who must reach the shares
  mkdir -p "$BASE"/shares/{guest,private,tiny,ro}
  id dropper >/dev/null 2>&1 || useradd -M -d /nonexistent -s /usr/sbin/nologin dropper
  chmod 0777 "$BASE/shares/guest" "$BASE/shares/ro"
  chown dropper:dropper "$BASE/shares/private"
  chmod 0700 "$BASE/shares/private"
  if ! mountpoint -q "$BASE/shares/tiny"; then
    mount -t tmpfs -o size=20m,mode=0777 tmpfs "$BASE/shares/tiny"
  fi
  write_config
  testparm -s "$CONF" >/dev/null 2>&1 || { log "testparm rejected $CONF"; exit 1; }
  printf 's3cret\ns3cret\n' | smbpasswd -c "$CONF" -a -s dropper >/dev/null

  # Never --no-process-group: smbd's shutdown would signal our whole process group.
  /usr/sbin/smbd --foreground -s "$CONF" -d 1 --debug-stdout </dev/null \
    >"$BASE/log/smbd.out" 2>&1 &
  local pid=$!
  echo "$pid" >"$PIDFILE"
  wait_for_tcp "$pid" || { down; exit 1; }
  # One share-level call: TCP accepts before a tree connect works. Not -L (spawns samba-dcerpcd).
  local tries=0
  until smbclient "//127.0.0.1/guest" -p "$PORT" -N -s "$CONF" -c ls >/dev/null 2>&1; do
    tries=$((tries + 1))
    if ((tries >= 50)); then
      log "smbd accepted TCP but the guest share never answered"
      down
      exit 1
    fi
    sleep 0.1
  done
  log "smbd pid $pid serving 127.0.0.1:$PORT from $BASE"
}

stop_pid() {
  local pid=$1 deadline=$((SECONDS + 10))
  kill -TERM "$pid" 2>/dev/null || return 0
  while kill -0 "$pid" 2>/dev/null; do
    # A zombie passes kill -0; it is gone for our purposes once its state is Z.
    [[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" == Z ]] && return 0
    if ((SECONDS >= deadline)); then
      kill -KILL "$pid" 2>/dev/null || true
      return 0
    fi
    sleep 0.05
  done
}

down() {
  if [[ -f "$PIDFILE" ]]; then
    stop_pid "$(cat "$PIDFILE")"
    rm -f "$PIDFILE"
  fi
  # Spawned on demand, re-parented to PID 1: it outlives smbd unless killed by its own pid.
  if [[ -f "$BASE/pid/samba-dcerpcd.pid" ]]; then
    stop_pid "$(cat "$BASE/pid/samba-dcerpcd.pid")"
    rm -f "$BASE/pid/samba-dcerpcd.pid"
  fi
  if mountpoint -q "$BASE/shares/tiny" 2>/dev/null; then
    umount "$BASE/shares/tiny" || log "could not unmount $BASE/shares/tiny"
  fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  *)
    echo "usage: BASE=dir PORT=n $0 up|down" >&2
    exit 2
    ;;
esac

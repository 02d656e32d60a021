#!/usr/bin/env bash
# Forwarding throughput: BrowserDropForwarding against the standard tools, same file, same run.
#
#   Benchmarks/forwarding.sh            1 GiB, medians of 3 (root: starts its own loopback smbd)
#   SIZE_MIB=256 RUNS=5 Benchmarks/forwarding.sh
#   DISK=1 Benchmarks/forwarding.sh     on the real disk instead of a tmpfs
#
# SMB: Forwarder → smb://127.0.0.1:PORT/guest vs `smbclient put` to guest, and the same pair for
# the password share (signed sessions).
# Local: Forwarder → a folder on the same disk vs `cp`, and vs `cp` + `sync FILE` (the forwarder
# fsyncs every file and folder before it removes the source; cp does not).
# By default everything (source, shares, local destination) lives on a tmpfs: on these shared
# VMs the virtual disk throttles after each GiB written, which swamps the software under test
# (whichever tool writes second is 3-4x slower). DISK=1 measures on the real disk anyway.
# The source file stays in the page cache (hard-linked into a fresh folder for every run, since a
# delivery removes its folder). Prints each run, medians, ratios (≥ 1 means we are as fast), and
# the forwarder's peak RSS.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
SIZE_MIB=${SIZE_MIB:-1024}
RUNS=${RUNS:-3}
work=$(mktemp -d /tmp/bd-fwdbench.XXXXXX)
if [[ "${DISK:-0}" != 1 ]]; then
  mount -t tmpfs -o "size=$((SIZE_MIB * 6 + 512))m" tmpfs "$work"
fi
chmod 0755 "$work"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
smb_base="$work/smbd"
cleanup() {
  BASE="$smb_base" PORT="$port" "$root/scripts/smbd.sh" down || true
  if mountpoint -q "$work"; then umount "$work"; fi
  rm -rf "$work"
}
trap cleanup EXIT

# In the checkout's own .build, so two checkouts (worktrees) never share a build folder.
scratch="$root/.build/fwdbench"
swift build --package-path "$root/Benchmarks/forwarding" --scratch-path "$scratch" \
  -c release >&2
bench="$(swift build --package-path "$root/Benchmarks/forwarding" \
  --scratch-path "$scratch" -c release --show-bin-path)/fwdbench"
BASE="$smb_base" PORT="$port" "$root/scripts/smbd.sh" up

master="$work/master.bin"
head -c "$((SIZE_MIB << 20))" /dev/urandom >"$master"
cat "$master" >/dev/null  # warm the page cache
guest="$smb_base/shares/guest"
private="$smb_base/shares/private"

now() { date +%s.%N; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
fresh_source() {
  rm -rf "$work/src"
  mkdir -p "$work/src"
  ln "$master" "$work/src/big.bin"
}
ours() {  # destination → seconds, and records peak RSS
  fresh_source
  local line
  sync
  line=$(BROWSERDROP_SMB_PASSWORD=s3cret "$bench" "$work/src" "$1")
  echo "$line" | sed 's/.*peak_rss_kib=//' >>"$work/rss"
  echo "$line" | sed 's/seconds=\([0-9.]*\).*/\1/'
}
# Flushes earlier runs' dirty pages first, so no run pays for another's writeback.
timed() { local t0 t1; sync; t0=$(now); "$@" >/dev/null; t1=$(now); echo "$t1 - $t0" | bc; }

declare -a smbclient_t smbclient_p_t fwd_guest_t fwd_private_t cp_t cpsync_t fwd_local_t
# SMB first, then local, so neither phase pays for the other's writeback or discards.
for run in $(seq "$RUNS"); do
  rm -rf "${guest:?}"/* "${private:?}"/*
  smbclient_t+=("$(timed smbclient //127.0.0.1/guest -p "$port" -N -s "$smb_base/smb.conf" \
    -c "put $master sc.bin")")
  fwd_guest_t+=("$(ours "smb://127.0.0.1:$port/guest/fwd")")
  cmp -s "$master" "$guest/fwd/big.bin" || {
    echo "forwarded file differs" >&2
    exit 1
  }
  rm -rf "${guest:?}"/*
  smbclient_p_t+=("$(timed smbclient //127.0.0.1/private -p "$port" -U 'dropper%s3cret' \
    -s "$smb_base/smb.conf" -c "put $master sc.bin")")
  fwd_private_t+=("$(ours "smb://dropper@127.0.0.1:$port/private/fwd")")
  cmp -s "$master" "$private/fwd/big.bin" || {
    echo "forwarded file differs" >&2
    exit 1
  }
  echo "smb run $run: smbclient-guest ${smbclient_t[-1]}s fwd-guest ${fwd_guest_t[-1]}s" \
    "smbclient-private ${smbclient_p_t[-1]}s fwd-private ${fwd_private_t[-1]}s"
done
rm -rf "${guest:?}"/* "${private:?}"/*
for run in $(seq "$RUNS"); do
  rm -rf "$work/local"
  mkdir -p "$work/local"
  cp_t+=("$(timed cp "$master" "$work/local/cp.bin")")
  rm -f "$work/local/cp.bin"
  cpsync_t+=("$(timed sh -c "cp '$master' '$work/local/cps.bin' && sync '$work/local/cps.bin'")")
  rm -f "$work/local/cps.bin"
  fwd_local_t+=("$(ours "$work/local/fwd")")
  cmp -s "$master" "$work/local/fwd/big.bin" || {
    echo "local copy differs" >&2
    exit 1
  }
  echo "local run $run: cp ${cp_t[-1]}s cp+sync ${cpsync_t[-1]}s fwd-local ${fwd_local_t[-1]}s"
done

m_sc=$(median "${smbclient_t[@]}")
m_g=$(median "${fwd_guest_t[@]}")
m_scp=$(median "${smbclient_p_t[@]}")
m_p=$(median "${fwd_private_t[@]}")
m_cp=$(median "${cp_t[@]}")
m_cs=$(median "${cpsync_t[@]}")
m_l=$(median "${fwd_local_t[@]}")
rate() { echo "scale=0; $SIZE_MIB / $1" | bc; }
ratio() { echo "scale=2; $1 / $2" | bc; }
echo "medians of $RUNS, $SIZE_MIB MiB:"
echo "  smbclient put guest  ${m_sc}s  $(rate "$m_sc") MiB/s"
echo "  smbclient put priv.  ${m_scp}s  $(rate "$m_scp") MiB/s"
echo "  forwarder → guest    ${m_g}s  $(rate "$m_g") MiB/s  ratio $(ratio "$m_sc" "$m_g")× smbclient"
echo "  forwarder → private  ${m_p}s  $(rate "$m_p") MiB/s  ratio $(ratio "$m_scp" "$m_p")× smbclient"
echo "  cp                   ${m_cp}s  $(rate "$m_cp") MiB/s"
echo "  cp + sync            ${m_cs}s  $(rate "$m_cs") MiB/s"
echo "  forwarder → local    ${m_l}s  $(rate "$m_l") MiB/s  ratio $(ratio "$m_cp" "$m_l")× cp," \
  "$(ratio "$m_cs" "$m_l")× cp+sync"
echo "  forwarder peak RSS   $(sort -g "$work/rss" | tail -1) KiB (largest of all runs)"

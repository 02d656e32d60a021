#!/usr/bin/env bash
# What `verify: .sha256` (the kiosk's default) costs: the forwarder with `.size` against
# `.sha256`, same file, same run, to the guest share of a loopback smbd and to a local folder,
# interleaved, medians of RUNS. Everything on a tmpfs (see Benchmarks/forwarding.sh for why).
#
#   sudo Benchmarks/verify-cost.sh                  # 1 GiB, medians of 3
#   SIZE_MIB=256 RUNS=5 sudo Benchmarks/verify-cost.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
SIZE_MIB=${SIZE_MIB:-1024}
RUNS=${RUNS:-3}
work=$(mktemp -d /tmp/bd-verifycost.XXXXXX)
mount -t tmpfs -o "size=$((SIZE_MIB * 4 + 512))m" tmpfs "$work"
chmod 0755 "$work"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
smb_base="$work/smbd"
cleanup() {
  BASE="$smb_base" PORT="$port" "$root/scripts/smbd.sh" down || true
  if mountpoint -q "$work"; then umount "$work"; fi
  rm -rf "$work"
}
trap cleanup EXIT
scratch="$root/.build/fwdbench"
swift build --package-path "$root/Benchmarks/forwarding" --scratch-path "$scratch" \
  -c release >&2
bench="$(swift build --package-path "$root/Benchmarks/forwarding" \
  --scratch-path "$scratch" -c release --show-bin-path)/fwdbench"
BASE="$smb_base" PORT="$port" "$root/scripts/smbd.sh" up
master="$work/master.bin"
head -c "$((SIZE_MIB << 20))" /dev/urandom >"$master"
guest="$smb_base/shares/guest"
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
run() {  # verify destination → seconds
  rm -rf "$work/src" "$work/local" "${guest:?}"/*
  mkdir -p "$work/src"
  ln "$master" "$work/src/big.bin"
  sync
  BROWSERDROP_VERIFY=$1 "$bench" "$work/src" "$2" | sed 's/seconds=\([0-9.]*\).*/\1/'
}
declare -a smb_size smb_sha local_size local_sha
for i in $(seq "$RUNS"); do
  smb_size+=("$(run size "smb://127.0.0.1:$port/guest/v")")
  smb_sha+=("$(run sha256 "smb://127.0.0.1:$port/guest/v")")
  local_size+=("$(run size "$work/local")")
  local_sha+=("$(run sha256 "$work/local")")
  echo "run $i: smb size ${smb_size[-1]}s sha256 ${smb_sha[-1]}s;" \
    "local size ${local_size[-1]}s sha256 ${local_sha[-1]}s"
done
rate() { echo "scale=0; $SIZE_MIB / $1" | bc; }
report() {
  local a b
  a=$(median "${@:2:$RUNS}")
  b=$(median "${@:$((RUNS + 2))}")
  echo "  $1: size ${a}s ($(rate "$a") MiB/s), sha256 ${b}s ($(rate "$b") MiB/s):" \
    "verifying costs $(echo "scale=0; ($b - $a) * 100 / $a" | bc)% of the forward time"
}
echo "medians of $RUNS, $SIZE_MIB MiB:"
report "forwarder → guest" "${smb_size[@]}" "${smb_sha[@]}"
report "forwarder → local" "${local_size[@]}" "${local_sha[@]}"

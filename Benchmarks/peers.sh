#!/usr/bin/env bash
# The peers harness (../shared/bench: nginx, copyparty, uploadserver, the loopback and disk
# limits) with BrowserDrop's two rows in the same run: the defaults, and the fast settings
# (--durability off --content-check off). Root, as the harness needs.
#
#   Benchmarks/peers.sh [BINARY]      # default .build/release/browserdrop
#   OUT=/tmp/peers.md REPS=3 Benchmarks/peers.sh
#
# Every other knob is the harness's own (see its README). Only 127.0.0.1 is contacted.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
binary=$(readlink -f "${1:-$root/.build/release/browserdrop}")
[[ -x $binary ]] || { echo "peers.sh: no binary at $binary (swift build -c release --product browserdrop)" >&2; exit 2; }
harness=${PEERS_HARNESS:-$root/../shared/bench}
[[ -x $harness/run.sh ]] || { echo "peers.sh: no harness at $harness (set PEERS_HARNESS)" >&2; exit 2; }
# stdin stays open (the command ends its session at end of input); stdout is not measured.
serve="exec $binary --bind 127.0.0.1 --port \"\$PORT\" --staging \"\$STAGING\" --reserve 0 --no-qr --json"
keep="< <(sleep 3600) > /dev/null"
cd "$harness" || exit 2
PROJECT_NAME="browserdrop (defaults)" \
  PROJECT_CMD="$serve $keep" \
  PROJECT_DEST='$STAGING/*' \
  PROJECT2_NAME="browserdrop (durability off, sniffing off)" \
  PROJECT2_CMD="$serve --durability off --content-check off $keep" \
  exec ./run.sh

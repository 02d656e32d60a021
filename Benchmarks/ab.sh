#!/usr/bin/env bash
# The project benchmark for two builds of browserdrop, one round each in turn, so that both see
# the same minutes of a shared machine: W1-W3, all four variants, ROUNDS rounds (default 3).
#
#   Benchmarks/ab.sh OLD_BINARY NEW_BINARY
#
# Each round prints bench.py's table for each binary; compare neighbours, and medians over the
# rounds. Build the old one with `git worktree add /tmp/old REV && swift build -c release
# --package-path /tmp/old --product browserdrop`.
set -u
[[ $# -eq 2 && -x $1 && -x $2 ]] || { echo "usage: $0 OLD_BINARY NEW_BINARY" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
for round in $(seq "${ROUNDS:-3}"); do
  for binary in "$1" "$2"; do
    echo "### round $round: $binary"
    REPS=1 BROWSERDROP="$binary" python3 "$root/Benchmarks/bench.py"
  done
done

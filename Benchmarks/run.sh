#!/usr/bin/env bash
# Builds browserdrop in release mode and runs the project's ingest benchmark (Benchmarks/bench.py).
#   Benchmarks/run.sh            W1–W3 with durability on and off, medians of 3 rounds (~10 min)
#   SMOKE=1 Benchmarks/run.sh    a few seconds, for CI: it proves the benchmark runs
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh" >&2
swift build --package-path "$root" -c release --product browserdrop >&2
BROWSERDROP="$(swift build --package-path "$root" -c release --show-bin-path)/browserdrop" \
  exec python3 "$root/Benchmarks/bench.py"

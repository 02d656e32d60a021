#!/usr/bin/env bash
# Soak run (not in CI): SMALL small uploads and LARGE_GIB GiB of 1 GiB uploads through the real
# `browserdrop --kiosk` on 127.0.0.1, forwarded to a local folder. Reports the command's RSS and
# open descriptors at start and end, errors (any reply but 201), and checks that every file
# arrived in the destination with its size. Defaults are the documented full run:
#   Benchmarks/soak.sh                         # 20,000 small + 20 GiB large
#   SMALL=2000 LARGE_GIB=2 Benchmarks/soak.sh  # a scaled-down run
# Needs curl, about LARGE_GIB+2 GiB free under WORK (default /tmp), and a built command
# (swift build -c release --product browserdrop; BIN overrides the binary).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
SMALL=${SMALL:-20000}
LARGE_GIB=${LARGE_GIB:-20}
PARALLEL=${PARALLEL:-4}
WORK=${WORK:-/tmp}
BIN=${BIN:-$root/.build/release/browserdrop}
[[ -x $BIN ]] || (cd "$root" && swift build -c release --product browserdrop)

work=$(mktemp -d "$WORK/browserdrop-soak.XXXXXX")
dest=$work/dest staging=$work/staging
mkdir -p "$dest" "$staging"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$BIN" --kiosk --to "$dest" --bind 127.0.0.1 --port "$port" --staging "$staging" --json \
  --quiet-period 2 --reserve 256M --no-qr >"$work/events.jsonl" 2>"$work/stderr" &
pid=$!
cleanup() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/config.json" >/dev/null && break; sleep 0.1; done

rss() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; }
fds() { ls "/proc/$pid/fd" | wc -l; }
echo "start: RSS $(rss) KiB, fds $(fds)"
rss_start=$(rss)
start=$(date +%s)

head -c 1000 /dev/urandom >"$work/small.bin"
seq "$SMALL" | xargs -P "$PARALLEL" -I{} curl -s -o /dev/null -w '%{http_code}\n' \
  --data-binary @"$work/small.bin" "http://127.0.0.1:$port/upload?path=small%2F{}.bin" \
  >"$work/small.codes"
echo "small: $SMALL uploads in $(( $(date +%s) - start )) s, RSS $(rss) KiB, fds $(fds)"

head -c $((1 << 30)) /dev/urandom >"$work/large.bin"
large_start=$(date +%s)
: >"$work/large.codes"
for i in $(seq "$LARGE_GIB"); do
  curl -s -o /dev/null -w "%{http_code}\n" -X POST -T "$work/large.bin" \
    "http://127.0.0.1:$port/upload?path=large%2F$i.bin" >>"$work/large.codes"
  # Forwarded files are checked and removed as they arrive, so the disk holds at most a few.
  for _ in $(seq 600); do [[ -z $(ls "$staging") || $(find "$dest" -name "$i.bin" | wc -l) -eq 1 ]] && break; sleep 0.5; done
  find "$dest" -path "*large/$i.bin" -size $((1 << 30))c -printf . >>"$work/large.ok"
  find "$dest" -path "*large/$i.bin" -delete
done
seconds=$(( $(date +%s) - large_start ))
echo "large: $LARGE_GIB GiB in $seconds s ($(( LARGE_GIB * 1024 / (seconds > 0 ? seconds : 1) )) MiB/s), RSS $(rss) KiB, fds $(fds)"

# Wait for the last batch to be forwarded (bounded), then check the small files.
for _ in $(seq 120); do
  [[ $(find "$dest" -path "*small/*.bin" | wc -l) -ge $SMALL ]] && break; sleep 0.5
done
small_ok=$(find "$dest" -path "*small/*.bin" -size 1000c | wc -l)
large_ok=$(wc -c <"$work/large.ok" 2>/dev/null || echo 0)
errors=$( (grep -vc '^201$' "$work/small.codes" "$work/large.codes" || true) | awk -F: '{s+=$2} END {print s}')
rss_end=$(rss)
echo "end: RSS $rss_end KiB (start $rss_start, growth $(( (rss_end - rss_start) * 100 / rss_start ))%), fds $(fds)"
echo "delivered: small $small_ok/$SMALL, large $large_ok/$LARGE_GIB; non-201 replies: $errors"
echo "log lines: $(wc -l <"$work/events.jsonl") events, $(wc -l <"$work/stderr") stderr"
[[ $small_ok -eq $SMALL && $large_ok -eq $LARGE_GIB && $errors -eq 0 ]]

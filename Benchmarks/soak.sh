#!/usr/bin/env bash
# Soak run (not in CI): SMALL small uploads and LARGE_GIB GiB of 1 GiB uploads through the real
# `browserdrop --kiosk --json` on 127.0.0.1, forwarded to a local folder. Reports the command's
# RSS and open descriptors at start, after every SAMPLE_EVERY small uploads, after every large
# file and at the end, errors (any reply but 201, any forwardFailed), and checks that every file
# answered 201 arrived in the destination exactly once with its size and SHA-256.
#
# Delivery is judged from the command's own JSON events, never from the destination folder
# alone: after each phase the script waits (bounded by DRAIN_TIMEOUT seconds) until the files
# counted in `batchClosed` events equal the 201 replies and the files counted in `forwarded`
# events equal those, so a check never races the kiosk's forwarding.
#
# Defaults are the documented full run:
#   Benchmarks/soak.sh                         # 20,000 small + 20 GiB large
#   SMALL=2000 LARGE_GIB=2 Benchmarks/soak.sh  # a scaled-down run
#   SMALL=10000 LARGE_GIB=0 DRAIN_EACH=1 Benchmarks/soak.sh  # one batch per SAMPLE_EVERY uploads
# Needs curl, jq, sha256sum, about 3 GiB free under WORK (default /tmp; large files are checked
# and removed one by one), and a built command (swift build -c release --product browserdrop;
# BIN overrides the binary).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
SMALL=${SMALL:-20000}
LARGE_GIB=${LARGE_GIB:-20}
PARALLEL=${PARALLEL:-4}
SAMPLE_EVERY=${SAMPLE_EVERY:-2000}
DRAIN_TIMEOUT=${DRAIN_TIMEOUT:-900}
WORK=${WORK:-/tmp}
BIN=${BIN:-$root/.build/release/browserdrop}
[[ -x $BIN ]] || (cd "$root" && swift build -c release --product browserdrop)

work=$(mktemp -d "$WORK/browserdrop-soak.XXXXXX")
dest=$work/dest staging=$work/staging events=$work/events.jsonl
mkdir -p "$dest" "$staging"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$BIN" --kiosk --to "$dest" --bind 127.0.0.1 --port "$port" --staging "$staging" --json \
  --quiet-period 2 --reserve 256M --no-qr >"$events" 2>"$work/stderr" &
pid=$!
cleanup() {
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  [[ ${KEEP:-0} == 1 ]] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/config.json" >/dev/null && break; sleep 0.1; done

rss() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; }
hwm() { awk '/^VmHWM/ {print $2}' "/proc/$pid/status"; }
fds() { ls "/proc/$pid/fd" | wc -l; }
anon() { awk '/^RssAnon/ {print $2}' "/proc/$pid/status"; }
file_backed() { awk '/^RssFile/ {print $2}' "/proc/$pid/status"; }
# RSS splits into heap and stacks (RssAnon: what a leak would grow) and pages of the binary and
# its libraries read in on first use (RssFile: clean, shared, bounded by their size).
sample() {
  echo "$1: RSS $(rss) KiB (anon $(anon), file $(file_backed); peak $(hwm) KiB), fds $(fds)"
}
# The sum of "files" over complete event lines of one kind (a line being written is skipped).
files_in() { jq -nR --arg e "$1" '[inputs | fromjson? | select(.event == $e) | .files] | add // 0' "$events"; }
count_of() { jq -nR --arg e "$1" '[inputs | fromjson? | select(.event == $e)] | length' "$events"; }
ok_replies() { cat "$work"/*.codes 2>/dev/null | grep -c '^201$' || true; }

# Waits until every file answered 201 so far is in a closed batch and every closed batch has
# been forwarded (the outbox is empty). Bounded; fails loudly with the event counts.
drain() {
  local expected deadline=$((SECONDS + DRAIN_TIMEOUT)) closed forwarded batches sent
  expected=$(ok_replies)
  while :; do
    closed=$(files_in batchClosed) forwarded=$(files_in forwarded)
    batches=$(count_of batchClosed) sent=$(count_of forwarded)
    if ((closed == expected && forwarded == expected && batches == sent)); then
      [[ -z $(find "$staging/outbox" -mindepth 1 -maxdepth 1 -name '[0-9]*') ]] && return 0
    fi
    if ((SECONDS >= deadline)); then
      echo "drain: timed out after ${DRAIN_TIMEOUT}s: 201 replies $expected, in closed batches" \
        "$closed ($batches batches), forwarded $forwarded ($sent batches)" >&2
      return 1
    fi
    sleep 0.5
  done
}

sample "start"
rss_start=$(rss) fds_start=$(fds) anon_start=$(anon)
start=$SECONDS

head -c 1000 /dev/urandom >"$work/small.bin"
small_sum=$(sha256sum "$work/small.bin" | cut -d' ' -f1)
: >"$work/small.codes"
rss_first=""
for ((from = 1; from <= SMALL; from += SAMPLE_EVERY)); do
  to=$((from + SAMPLE_EVERY - 1 < SMALL ? from + SAMPLE_EVERY - 1 : SMALL))
  seq "$from" "$to" | xargs -P "$PARALLEL" -I{} curl -s --max-time 60 -o /dev/null \
    -w '%{http_code}\n' --data-binary @"$work/small.bin" \
    "http://127.0.0.1:$port/upload?path=small%2F{}.bin" >>"$work/small.codes" || true
  sample "after $to small"
  [[ -n $rss_first ]] || rss_first=$(rss)
  # DRAIN_EACH=1: every chunk becomes its own batch, forwarded before the next chunk starts
  # (tells memory held by one big session from memory that grows across sessions).
  if [[ ${DRAIN_EACH:-0} == 1 ]]; then drain && sample "after $to small, forwarded"; fi
done
echo "small: $SMALL uploads in $((SECONDS - start)) s"
drain
sample "small forwarded ($((SECONDS - start)) s)"
small_found=$(find "$dest" -path '*/small/*' -type f | wc -l)
small_ok=$(find "$dest" -path '*/small/*' -type f -size 1000c -print0 | xargs -0 -r sha256sum |
  awk -v s="$small_sum" '$1 == s' | wc -l)
small_names=$(find "$dest" -path '*/small/*' -type f -printf '%f\n' | sort -u | wc -l)
small_renamed=$(find "$dest" -path '*/small/*' -type f -name '* *' | wc -l)

head -c $((1 << 30)) /dev/urandom >"$work/large.bin"
large_sum=$(sha256sum "$work/large.bin" | cut -d' ' -f1)
large_start=$SECONDS
large_ok=0
: >"$work/large.codes"
for i in $(seq "$LARGE_GIB"); do
  curl -s --max-time 900 -o /dev/null -w "%{http_code}\n" -X POST -T "$work/large.bin" \
    "http://127.0.0.1:$port/upload?path=large%2F$i.bin" >>"$work/large.codes" || true
  drain
  # Exactly one copy, the right size and digest; removed so the disk holds at most a few GiB.
  mapfile -t copies < <(find "$dest" -path "*/large/*" -type f)
  if ((${#copies[@]} == 1)) && [[ ${copies[0]} == */large/$i.bin ]] &&
    (($(stat -c %s "${copies[0]}") == 1 << 30)) &&
    [[ $(sha256sum "${copies[0]}" | cut -d' ' -f1) == "$large_sum" ]]; then
    large_ok=$((large_ok + 1))
  else
    echo "large $i: found ${#copies[@]} copies: ${copies[*]:-none}" >&2
  fi
  rm -f "${copies[@]}"
  sample "after large $i ($((SECONDS - large_start)) s)"
done
seconds=$((SECONDS - large_start))
echo "large: $LARGE_GIB GiB in $seconds s ($((LARGE_GIB * 1024 / (seconds > 0 ? seconds : 1))) MiB/s)"

errors=$( (grep -vc '^201$' "$work/small.codes" "$work/large.codes" || true) | awk -F: '{s+=$2} END {print s+0}')
failed=$(count_of forwardFailed)
rss_end=$(rss) fds_end=$(fds)
echo "end: RSS $rss_end KiB (anon $(anon), file $(file_backed)), peak $(hwm) KiB, fds $fds_end" \
  "(start: RSS $rss_start KiB, anon $anon_start, fds $fds_start)"
echo "RSS growth: $(((rss_end - rss_start) * 100 / rss_start))% since start," \
  "$(((rss_end - rss_first) * 100 / rss_first))% since the first $SAMPLE_EVERY small ($rss_first KiB)"
echo "delivered: small $small_ok/$SMALL (found $small_found, distinct names $small_names," \
  "renamed $small_renamed), large $large_ok/$LARGE_GIB; non-201 replies: $errors;" \
  "forwardFailed: $failed"
echo "log lines: $(wc -l <"$events") events, $(wc -l <"$work/stderr") stderr;" \
  "outbox: $(find "$staging/outbox" -mindepth 1 -maxdepth 1 -name '[0-9]*' | wc -l) batches left"
echo "total: $((SECONDS - start)) s"
[[ $small_ok -eq $SMALL && $small_found -eq $SMALL && $large_ok -eq $LARGE_GIB && $errors -eq 0 &&
  $failed -eq 0 ]]

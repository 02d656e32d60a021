#!/usr/bin/env bash
# What content sniffing costs a 1 GiB upload over loopback: one browserdrop binary (build it with
# `swift build -c release --product browserdrop`), durability off, staging under /tmp, each
# round uploading the same file once with `--content-check disguised` (the default) and once with
# `--content-check off`, the order alternating from round to round. Prints every run, then the
# median and range of curl's total time for each mode.
#
#   Benchmarks/sniff-ab.sh .build/release/browserdrop        (ROUNDS=9, DATA=/tmp/sniff-ab-1g.bin)
#
# DATA is made from /dev/urandom when missing: 1 GiB less one byte, because curl 7.88 refuses to
# read a file of 1 GiB or more for `--data-binary @FILE` ("out of memory"). It is uploaded as
# movie.mp4, so the disguise rule (a media name) is checked in full. curl reads the whole file
# into memory before it connects. CURL_BODY=upload-file sends it with `-T FILE` instead (streamed
# from the file, any size).
set -u
binary=${1:?usage: $0 BINARY}
data=${DATA:-/tmp/sniff-ab-1g.bin}
rounds=${ROUNDS:-9}
if [[ ! -f $data ]]; then
  head -c $((1024 * 1024 * 1024 - 1)) /dev/urandom > "$data"
fi
case ${CURL_BODY:-data-binary} in
  data-binary) body=(--data-binary "@$data") ;;
  upload-file) body=(-T "$data") ;;
  *) echo "CURL_BODY is data-binary or upload-file" >&2; exit 2 ;;
esac
size=$(stat -c %s "$data")
results=$(mktemp /tmp/sniff-ab-results.XXXX)

run() { # MODE → prints "MODE STATUS SECONDS"
  local mode=$1 staging port pid line
  staging=$(mktemp -d /tmp/sniff-ab-staging.XXXX)
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$binary" --bind 127.0.0.1 --port "$port" --staging "$staging" --reserve 0 --no-qr --json \
    --durability off --content-check "$mode" < /dev/null > /dev/null 2>&1 &
  pid=$!
  for _ in $(seq 200); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
  # Start from a clean page cache: the previous run's gigabyte is no longer being written back.
  sync; sleep 1
  line=$(curl -sS -o /dev/null -w "%{http_code} %{time_total}" -X POST \
    -H "Origin: http://127.0.0.1:$port" -H "Content-Type: application/octet-stream" \
    "${body[@]}" "http://127.0.0.1:$port/upload?path=movie.mp4")
  kill "$pid"; wait "$pid" 2>/dev/null
  rm -rf "$staging"
  echo "$mode $line"
}

for round in $(seq "$rounds"); do
  if (( round % 2 )); then order="disguised off"; else order="off disguised"; fi
  for mode in $order; do
    out=$(run "$mode")
    echo "round $round: $out"
    echo "$round $out" >> "$results"
  done
done

python3 - "$results" "$size" <<'EOF'
import statistics, sys
runs, rounds = {}, {}
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) != 4 or parts[2] != "201":
        print(f"a run failed: {line.strip()}")
        continue
    round_, mode, _, seconds = parts
    runs.setdefault(mode, []).append(float(seconds))
    rounds.setdefault(round_, {})[mode] = float(seconds)
size = int(sys.argv[2])
for mode in ("disguised", "off"):
    times = sorted(runs.get(mode, []))
    if not times:
        continue
    median = statistics.median(times)
    print(f"{mode:9} n={len(times)} median {median:.3f} s ({size / median / 2**20:.0f} MiB/s), "
          f"range {times[0]:.3f}-{times[-1]:.3f} s")
pairs = sorted(r["disguised"] - r["off"] for r in rounds.values() if len(r) == 2)
if pairs:
    on, off = statistics.median(runs["disguised"]), statistics.median(runs["off"])
    print(f"difference of medians (disguised - off): {on - off:+.3f} s ({(on / off - 1) * 100:+.1f} %)")
    print(f"per-round differences: median {statistics.median(pairs):+.3f} s, "
          f"range {pairs[0]:+.3f} to {pairs[-1]:+.3f} s")
EOF
rm -f "$results"

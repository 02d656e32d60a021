#!/usr/bin/env bash
# Durable ingest of one 1 GiB upload (durability on, sniffing off) by two builds of browserdrop,
# interleaved, each followed by `dd conv=fdatasync` of the same bytes: the disk of these shared
# VMs changes speed from minute to minute, so only neighbours compare.
#
#   Benchmarks/durable-ab.sh OLD_BINARY NEW_BINARY     (5 rounds; data from Benchmarks/run.sh)
set -u
data=${DATA:-/tmp/browserdrop-bench/w1-1024.bin}
[[ $# -ge 1 && -f $data ]] || { echo "usage: $0 BINARY... (needs $data: run Benchmarks/run.sh once, or set DATA)" >&2; exit 2; }
for r in 1 2 3 4 5; do
  for b in "$@"; do
    st=$(mktemp -d /tmp/abst.XXXX)
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    $b --bind 127.0.0.1 --port $port --staging $st --reserve 0 --no-qr --json --durability on --content-check off < <(sleep 120) > /dev/null 2>&1 &
    pid=$!
    for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.05; done
    sync; sleep 2
    t=$(curl -sS -o /dev/null -w "%{http_code} %{time_total}" -X POST -H "Origin: http://127.0.0.1:$port" -T $data "http://127.0.0.1:$port/upload?path=w1.bin")
    echo "round $r $b $t"
    kill $pid; wait $pid 2>/dev/null; rm -rf $st
    sync; sleep 1
    t0=$(date +%s.%N); dd if=$data of=/tmp/abdd.bin bs=1M conv=fdatasync status=none; t1=$(date +%s.%N); rm -f /tmp/abdd.bin
    echo "round $r dd-fdatasync-after-$b $(python3 -c "print('%.3f'%($t1-$t0))")"
  done
done

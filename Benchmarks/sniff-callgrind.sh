#!/usr/bin/env bash
# Instructions per libmagic call on random 16 KiB bodies, as the sniffer made them before the
# soft-magic screen (whole database) and as it makes them now (the two small databases the
# screen builds), counted with valgrind's callgrind. Needs valgrind and libmagic-dev.
#
#   Benchmarks/sniff-callgrind.sh            (COUNT=200 calls per figure, LENGTH=16384)
#
# The small databases come from the test that checks the screen is in use:
#   SNIFF_DATABASES_DIR=DIR swift test --filter theScreenIsInUseWithThisLibmagic
# writes DIR/residual.mgc and DIR/unscreened.mgc; this script runs that test itself.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
count=${COUNT:-200}
length=${LENGTH:-16384}
work=$(mktemp -d /tmp/sniff-callgrind.XXXX)
trap 'rm -rf "$work"' EXIT
cc -O2 -g -o "$work/harness" "$root/Benchmarks/sniff-callgrind.c" -lmagic
SNIFF_DATABASES_DIR="$work" swift test --package-path "$root" \
  --filter theScreenIsInUseWithThisLibmagic > "$work/test.log" 2>&1 || {
  cat "$work/test.log"; exit 1; }
measure() { # MODE DATABASE → instructions per call
  valgrind --tool=callgrind --callgrind-out-file="$work/out" --toggle-collect=run_one \
    "$work/harness" "$1" "$2" "$count" "$length" > "$work/answer" 2> "$work/valgrind"
  local total
  total=$(grep -o 'Collected : [0-9]*' "$work/valgrind" | grep -o '[0-9]*$')
  echo "$(( total / count )) instructions per call; $(cat "$work/answer")"
}
echo "random bodies of $length bytes, $count calls each, libmagic $(file --version | head -1)"
echo "whole database (before):     $(measure whole -)"
echo "weak and unscreened rules:   $(measure small "$work/residual.mgc")"
echo "unscreened rules only:       $(measure small "$work/unscreened.mgc")"
echo "no soft-magic pass at all:   $(measure nosoft "$work/unscreened.mgc")"

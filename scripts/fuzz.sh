#!/usr/bin/env bash
# Builds the libFuzzer targets in Fuzz/ (address sanitizer, coverage on the BrowserDrop library)
# and runs each for a bounded time, starting from its checked-in seeds in Fuzz/corpus/<target>.
#   scripts/fuzz.sh [seconds per target, default 60] [target…]
# Prints executions and executions/s per target. Exits non-zero when a target crashes, times out
# or runs out of memory; the input that did it is kept as artifacts/fuzz/<target>-crash-… .
# New corpus entries go to .build/fuzz/corpus/<target> (not checked in).
set -uo pipefail
export SWIFT_BACKTRACE=enable=no
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

seconds=${1:-60}
shift || true
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=(FuzzRequestHead FuzzUploadPath FuzzHostPolicy)

# libFuzzer without its own main, from the toolchain that builds the package.
swiftc_path=$(readlink -f "$(command -v swiftc)")
lib=$(ls "$(dirname "$swiftc_path")"/../lib/clang/*/lib/linux/libclang_rt.fuzzer_no_main-x86_64.a \
  2>/dev/null | head -1)
if [[ -z $lib ]]; then
  echo "fuzz.sh: this toolchain has no libclang_rt.fuzzer_no_main (needed for -sanitize=fuzzer)" >&2
  exit 1
fi
export BROWSERDROP_FUZZ=1 BROWSERDROP_FUZZ_LIB=$lib
for target in "${targets[@]}"; do
  if ! swift build --scratch-path .build/fuzz --product "$target" 2>&1 \
    | grep -v "Cannot export local symbol" | grep -E "error|warning|Compiling|complete"; then
    :
  fi
  [[ -x .build/fuzz/debug/$target ]] || { echo "fuzz.sh: $target did not build" >&2; exit 1; }
done

mkdir -p artifacts/fuzz
status=0
for target in "${targets[@]}"; do
  work=.build/fuzz/corpus/$target
  mkdir -p "$work"
  log=artifacts/fuzz/$target.log
  max_len=4096
  [[ $target == FuzzRequestHead ]] && max_len=20000
  # Swift's runtime keeps metadata caches for the life of the process: not leaks to report.
  ASAN_OPTIONS=detect_leaks=0 timeout $((seconds + 120)) ".build/fuzz/debug/$target" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=$max_len \
    -print_final_stats=1 -artifact_prefix="artifacts/fuzz/$target-" \
    "$work" "Fuzz/corpus/$target" >"$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  corpus=$(ls "$work" | wc -l)
  if [[ $rc -eq 0 ]]; then
    echo "fuzz: $target: ${runs:-?} executions in ${seconds}s (${rate:-?}/s), corpus $corpus new inputs, no crash"
  else
    status=1
    echo "fuzz: $target FAILED (exit $rc) after ${runs:-?} executions; log $log; input:"
    ls artifacts/fuzz/"$target"-* 2>/dev/null | grep -v '\.log$'
    grep -m5 -E "invariant broken|ERROR|Fatal error|SUMMARY" "$log"
  fi
done
exit $status

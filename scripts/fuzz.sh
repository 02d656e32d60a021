#!/usr/bin/env bash
# Builds the libFuzzer targets in Fuzz/ (address sanitizer, coverage on the BrowserDrop library)
# and runs each for a bounded time or number of executions, starting from its checked-in seeds in
# Fuzz/corpus/<target>.
#   scripts/fuzz.sh [seconds per target, default 60] [target…]
#   scripts/fuzz.sh --runs <executions per target> [target…]
# FUZZ_TIMEOUT (seconds, default 10) is libFuzzer's bound for one input; raise it for long runs
# on a loaded machine, where a starved process can take longer than that on any input.
# FUZZ_OPTIMIZE=1 builds the targets optimized (-O, still instrumented and with the address
# sanitizer) in .build/fuzz-opt: about five times the executions per second, for long runs.
# Prints executions and executions/s per target. Exits non-zero when a target crashes, times out
# or runs out of memory; the input that did it is kept as artifacts/fuzz/<target>-crash-… .
# New corpus entries go to .build/fuzz/corpus/<target> (not checked in).
set -uo pipefail
export SWIFT_BACKTRACE=enable=no
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

runs=
seconds=60
if [[ ${1:-} == --runs ]]; then
  [[ ${2:-} =~ ^[0-9]+$ ]] || { echo "fuzz.sh: --runs needs a number of executions" >&2; exit 2; }
  runs=$2
  shift 2
elif [[ ${1:-} =~ ^[0-9]+$ ]]; then
  seconds=$1
  shift
fi
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] &&
  targets=(FuzzRequestHead FuzzUploadPath FuzzHostPolicy FuzzRequestPolicy)
# A time bound, or an execution count with no time bound (libFuzzer's -max_total_time=0) and a
# watchdog of a day, which any count a person asks for here finishes well within.
if [[ -n $runs ]]; then
  bound=(-runs="$runs" -max_total_time=0)
  watchdog=86400
  budget="of $runs asked"
else
  bound=(-max_total_time="$seconds")
  watchdog=$((seconds + 120))
  budget="in ${seconds}s"
fi

# libFuzzer without its own main, from the toolchain that builds the package.
swiftc_path=$(readlink -f "$(command -v swiftc)")
lib=$(ls "$(dirname "$swiftc_path")"/../lib/clang/*/lib/linux/libclang_rt.fuzzer_no_main-x86_64.a \
  2>/dev/null | head -1)
if [[ -z $lib ]]; then
  echo "fuzz.sh: this toolchain has no libclang_rt.fuzzer_no_main (needed for -sanitize=fuzzer)" >&2
  exit 1
fi
export BROWSERDROP_FUZZ=1 BROWSERDROP_FUZZ_LIB=$lib
scratch=.build/fuzz
optimize=()
if [[ ${FUZZ_OPTIMIZE:-0} == 1 ]]; then
  scratch=.build/fuzz-opt
  optimize=(-Xswiftc -O)
fi
for target in "${targets[@]}"; do
  if ! swift build --scratch-path "$scratch" --product "$target" "${optimize[@]}" 2>&1 \
    | grep -v "Cannot export local symbol" | grep -E "error|warning|Compiling|complete"; then
    :
  fi
  [[ -x $scratch/debug/$target ]] || { echo "fuzz.sh: $target did not build" >&2; exit 1; }
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
  ASAN_OPTIONS=detect_leaks=0 timeout "$watchdog" "$scratch/debug/$target" \
    "${bound[@]}" -timeout="${FUZZ_TIMEOUT:-10}" -rss_limit_mb=2048 -max_len=$max_len \
    -print_final_stats=1 -artifact_prefix="artifacts/fuzz/$target-" \
    "$work" "Fuzz/corpus/$target" >"$log" 2>&1
  rc=$?
  executed=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  corpus=$(ls "$work" | wc -l)
  if [[ $rc -eq 0 ]]; then
    echo "fuzz: $target: ${executed:-?} executions $budget (${rate:-?}/s), corpus $corpus new inputs, no crash"
  else
    status=1
    echo "fuzz: $target FAILED (exit $rc) after ${executed:-?} executions; log $log; input:"
    ls artifacts/fuzz/"$target"-* 2>/dev/null | grep -v '\.log$'
    grep -m5 -E "invariant broken|ERROR|Fatal error|SUMMARY" "$log"
  fi
done
exit $status

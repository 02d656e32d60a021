#!/usr/bin/env bash
# Sets up and runs the whole test suite: Debian packages and a Python venv when missing, a debug
# build, a loopback smbd for the forwarding tests, `swift test`, then the page in headless
# Chromium. Every phase runs even when an earlier one fails; the exit code says whether all passed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

scripts/setup.sh --test || exit 1
mkdir -p artifacts
swift build --build-tests 2>&1 | tee artifacts/build.log
((PIPESTATUS[0] == 0)) || exit 1
bin=$(swift build --show-bin-path)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

smb_base=$(mktemp -d /tmp/browserdrop-smbd.XXXXXX)
chmod 0755 "$smb_base"  # smbd serves guests as nobody, who must be able to reach the shares
smb_port=$(free_port)
stop_smbd() { BASE="$smb_base" PORT="$smb_port" scripts/smbd.sh down || true; rm -rf "$smb_base"; }
trap stop_smbd EXIT
if ! BASE="$smb_base" PORT="$smb_port" scripts/smbd.sh up; then
  echo "test.sh: the loopback smbd did not start; see $smb_base/log" >&2
  exit 1
fi
export BROWSERDROP_TEST_SMB_PORT="$smb_port" BROWSERDROP_TEST_SMB_BASE="$smb_base"

passed=0
failed=0
phase() {
  local name=$1
  shift
  echo "=== $name"
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "=== $name FAILED"; fi
}

# Everything but the suites that measure the whole process, time kill points or race a client
# against the server's idle timeout: those run alone afterwards, so the rest of the suite's load
# on two cores can't skew them (the server keeps time on its own thread; a client task of a
# loaded test process can be held back for seconds).
# Swift 6 mode with zero warnings (a clean checkout compiles everything, so its build log shows
# every warning there is) and `swift format lint --strict` clean against the committed .swift-format.
clean_code() {
  local warnings
  warnings=$(grep -E "(warning|error): " artifacts/build.log | sort -u)
  if [[ -n "$warnings" ]]; then
    echo "$warnings"
    return 1
  fi
  swift format lint --strict --recursive Sources Tests Examples Fuzz
}
phase "no warnings, format clean" clean_code
phase "swift test" timeout 1200 swift test --skip-build --skip FloodTests --skip CrashTrialTests \
  --skip ConnectionTests
phase "connection timing (alone)" timeout 300 swift test --skip-build --filter ConnectionTests
phase "flood (alone)" timeout 300 swift test --skip-build --filter FloodTests
phase "crash trials (alone)" timeout 600 swift test --skip-build --filter CrashTrialTests
phase "fuzz" scripts/fuzz.sh 60
# The documented install: a release build into a scratch DESTDIR, the binary alone serves its page
# and loads only Debian's libraries.
phase "install" timeout 900 scripts/check-install.sh
# The page in Chromium, Firefox and WebKit, plus axe-core and the Nu HTML checker; -rs lists every
# skip with its reason (what an engine can't do here). The phase's time is printed for the record.
browser_tests() {
  local started rc
  started=$(date +%s)
  env BROWSERDROP_TEST_HOST="$bin/BrowserDropTestHost" SE_OFFLINE=true SE_AVOID_STATS=true \
    timeout 900 .venv/bin/python -m pytest -q -rs -p no:cacheprovider Tests/Browser
  rc=$?
  echo "browser tests: $(($(date +%s) - started)) s"
  return $rc
}
phase "browser tests" browser_tests
# The kiosk's operations (Tests/Operations): /metrics through Prometheus's parser with a real smbd,
# and Avahi in network namespaces of the tests' own.
phase "operations tests" env BROWSERDROP_BINARY="$bin/browserdrop" \
  timeout 600 .venv/bin/python -m pytest -q -p no:cacheprovider Tests/Operations

# A few seconds of the project's benchmark: it proves Benchmarks/bench.py runs and verifies what it
# stored; it asserts nothing about speed (that is Benchmarks/run.sh's job, on a quiet machine).
bench_smoke() {
  local scratch rc
  scratch=$(mktemp -d /tmp/browserdrop-bench-smoke.XXXXXX)
  SMOKE=1 SCRATCH="$scratch" BROWSERDROP="$bin/browserdrop" timeout 300 python3 Benchmarks/bench.py
  rc=$?
  rm -rf "$scratch"
  return $rc
}
phase "benchmark smoke" bench_smoke

echo "phases: $passed passed, $failed failed"
[[ $failed -eq 0 ]]

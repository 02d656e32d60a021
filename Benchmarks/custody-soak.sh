#!/usr/bin/env bash
# Exactly-once soak (issue 16; not in CI): the FleetTests harness (Tests/BrowserDropCommandTests/
# Support/Fleet.swift) scaled up, for one kiosk and for a fleet of three sharing one folder, each
# against a local folder and a real smbd of its own on 127.0.0.1. Every round gives each kiosk a
# `big.bin`, a `note.txt` and an empty `empty.txt` (same names and sizes, contents of its own)
# for `--batch-folder intake`; KILLS rounds `kill -9` a kiosk while it forwards (then restart it),
# OUTAGES rounds stop smbd under the deliveries and start it again. At the end the destination is
# compared with the uploads (SHA-256): lost, duplicated, extra (content never uploaded) and
# leftover (hidden temporary files or markers) are printed per run and summed; all must be 0.
# Claims a kiosk left and reported (the residual claim window, a connection the server still
# held) are printed too; they are not failures.
#
#   sudo Benchmarks/custody-soak.sh                   # 1 and 3 kiosks, 14 rounds, 6 kills and
#                                                     # 3 outages per SMB run: 24 kills, 6 outages
#   ROUNDS=30 KILLS=12 OUTAGES=6 sudo Benchmarks/custody-soak.sh
#
# Root (smbd.sh: useradd, mount, smbd switching users); a debug build with tests
# (`swift build --build-tests`; BUILD=1 builds it first).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
ROUNDS=${ROUNDS:-14}
KILLS=${KILLS:-6}
OUTAGES=${OUTAGES:-3}
BIG_SIZE=${BIG_SIZE:-6291456}
SEED=${SEED:-1216}
[[ ${BUILD:-0} == 1 ]] && swift build --build-tests
log=$(mktemp /tmp/browserdrop-custody-soak.XXXXXX)
status=0
for kiosks in 1 3; do
  run_log=$log.$kiosks
  BROWSERDROP_FLEET_KIOSKS=$kiosks BROWSERDROP_FLEET_ROUNDS=$ROUNDS BROWSERDROP_FLEET_KILLS=$KILLS \
    BROWSERDROP_FLEET_OUTAGES=$OUTAGES BROWSERDROP_FLEET_BIG_SIZE=$BIG_SIZE \
    BROWSERDROP_FLEET_SEED=$((SEED + kiosks)) \
    timeout 3600 swift test --skip-build --filter FleetTests >"$run_log" 2>&1 || status=1
  grep -E '^fleet (local|smb) [0-9]+ kiosks' "$run_log" || { tail -40 "$run_log"; status=1; }
  grep -E '^fleet (local|smb) [0-9]+ kiosks' "$run_log" >>"$log.summary" || true
done
awk '
  { for (i = 1; i <= NF; i++) {
      if ($i == "uploaded") up += $(i + 1); if ($i == "delivered") del += $(i + 1)
      if ($i == "lost") lost += $(i + 1); if ($i == "duplicated") dup += $(i + 1)
      if ($i == "extra") extra += $(i + 1); if ($i == "leftover") left += $(i + 1)
      if ($i == "-9:") kills += $(i + 1); if ($i == "outages:") out += $(i + 1)
      if ($i == "reported:") reported += $(i + 1) } }
  END { gsub(",", "", up); printf "total: uploaded %d, delivered %d: lost %d, duplicated %d, extra %d, leftover %d (kill -9: %d, smbd outages: %d, claims left and reported: %d)\n", up, del, lost, dup, extra, left, kills, out, reported
        exit (lost + dup + extra + left > 0) }' "$log.summary" || status=1
rm -f "$log.summary" "$log"
# A run that was not clean keeps its whole output: every kiosk's events are printed there.
if [[ $status == 0 ]]; then rm -f "$log".[13]; else echo "custody-soak: test output in $log.1, $log.3"; fi
exit $status

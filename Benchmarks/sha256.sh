#!/usr/bin/env bash
# SHA-256 throughput of BrowserDropForwarding's digest (what `verify: .sha256` costs per byte
# read back): a 1 GiB buffer hashed three times, MB/s and the median (Benchmarks/sha256/main.swift).
#
#   Benchmarks/sha256.sh              # the digest of this checkout (libcrypto's EVP SHA-256)
#   REV=b16f28f Benchmarks/sha256.sh  # the hand-written Swift one of an older commit
#
# Compiled with `swiftc -O` from the source file alone, as the release build compiles it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/browserdrop-sha256.XXXXXX)
trap 'rm -rf "$work"' EXIT
flags=()
if [[ -n "${REV:-}" ]]; then
  git -C "$root" show "$REV:Sources/BrowserDropForwarding/Support/SHA256.swift" >"$work/digest.swift"
  echo 'func makeDigest() -> SHA256 { SHA256() }' >>"$work/digest.swift"
else
  cp "$root/Sources/BrowserDropForwarding/Support/SHA256Digest.swift" "$work/digest.swift"
  echo 'func makeDigest() -> SHA256Digest { SHA256Digest()! }' >>"$work/digest.swift"
  flags=(-I "$root/Sources/CCrypto")
fi
swiftc -O -module-name Digest "${flags[@]}" -o "$work/sha256" \
  "$work/digest.swift" "$root/Benchmarks/sha256/main.swift" 2>&1 | grep -v '^$' || true
"$work/sha256"

#!/usr/bin/env bash
# Checks the documented install (`make install`, which runs scripts/install.sh) end to end:
# installs into a scratch DESTDIR, then copies the installed binary alone into an empty folder and checks that every
# shared library it loads belongs to a Debian package, that it serves the upload page it carries
# on 127.0.0.1, and that SIGINT ends it with status 0; last, `make uninstall` removes every file
# it installed. Run by scripts/test.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
scratch=$(mktemp -d /tmp/browserdrop-install.XXXXXX)
pid=
cleanup() {
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  rm -rf "$scratch"
}
trap cleanup EXIT
fail() {
  echo "check-install: $*" >&2
  exit 1
}

make -C "$root" install DESTDIR="$scratch/pkg" PREFIX=/usr/local >"$scratch/install.log" 2>&1 \
  || { cat "$scratch/install.log" >&2; fail "make install failed"; }
installed="$scratch/pkg/usr/local/bin/browserdrop"
[[ -x "$installed" ]] || fail "no $installed"
for doc in command.md examples/browserdrop-kiosk.service examples/README.md; do
  [[ -f "$scratch/pkg/usr/local/share/doc/browserdrop/$doc" ]] || fail "no share/doc/browserdrop/$doc"
done

mkdir "$scratch/alone"
cp "$installed" "$scratch/alone/browserdrop"
binary="$scratch/alone/browserdrop"

# Every library the loader resolves is a file some Debian package installed (with merged /usr,
# dpkg may know it under /lib or /usr/lib, by the name ldd prints or by the file it points to).
owned() {
  local path=$1 candidate
  for candidate in "$path" "$(readlink -f "$path")"; do
    for variant in "$candidate" "${candidate#/usr}" "/usr$candidate"; do
      dpkg -S "$variant" >/dev/null 2>&1 && return 0
    done
  done
  return 1
}
if ldd "$binary" | grep -q "not found"; then
  ldd "$binary" >&2
  fail "a shared library is missing"
fi
count=0
while read -r library; do
  owned "$library" || fail "$library is not from a Debian package"
  count=$((count + 1))
done < <(ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }')
((count > 0)) || fail "ldd listed no library"
# libsmbclient, libavahi-client and libsystemd are opened with dlopen only when an SMB destination,
# --name or NOTIFY_SOCKET needs them (Package.swift): linked, they would be mapped at every start.
if ldd "$binary" | grep -E "libsmbclient|libavahi|libdbus|libsystemd"; then
  fail "the binary links a library that must be loaded only when used"
fi

# The page it carries, served on a free port of 127.0.0.1.
"$binary" --json --port 0 --bind 127.0.0.1 --staging "$scratch/staging" --no-qr \
  </dev/null >"$scratch/events" 2>"$scratch/errors" &
pid=$!
url=
for _ in $(seq 1 100); do
  url=$(sed -n 's/.*"url":"\(http:[^"]*\)".*/\1/p' "$scratch/events" | head -n 1)
  [[ -n "$url" ]] && break
  kill -0 "$pid" 2>/dev/null || { cat "$scratch/errors" >&2; fail "the binary exited at start"; }
  sleep 0.1
done
[[ -n "$url" ]] || fail "no listening event in 10 s"
page=$(curl -sS --max-time 10 "$url")
[[ "$page" == "<!doctype html>"* && "$page" == *"<title>"* ]] || fail "no upload page at $url"
curl -sS --max-time 10 "${url}config.json" | grep -q '"maximumConcurrentUploads"' \
  || fail "no config.json at $url"
kill -INT "$pid"
status=0
wait "$pid" || status=$?
pid=
((status == 0)) || fail "SIGINT ended it with status $status"
make -C "$root" uninstall DESTDIR="$scratch/pkg" PREFIX=/usr/local >/dev/null
left=$(find "$scratch/pkg" -type f)
[[ -z "$left" ]] || fail "make uninstall left: $left"
echo "check-install: the installed binary, alone, loads only Debian's libraries ($count) and serves its page"

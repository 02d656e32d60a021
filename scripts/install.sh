#!/usr/bin/env bash
# Builds the browserdrop command in release mode and installs it, with its documentation.
#
#   scripts/install.sh                 installs to /usr/local (bin/browserdrop, share/doc/browserdrop)
#   PREFIX=/opt/browserdrop scripts/install.sh
#   DESTDIR=/tmp/pkg scripts/install.sh  stages the files for a package
#
# Run it as yourself, not with sudo: it builds as you and runs only the copying with sudo, and
# only when the destination isn't writable by you.
#
# The binary carries the upload page inside it; it needs only Debian's shared libraries
# (libqrencode4, libmagic1; libsmbclient only for SMB forwarding, loaded when first used) and the
# Swift runtime, which is linked statically.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
prefix=${PREFIX:-/usr/local}
destdir=${DESTDIR:-}

# The Debian packages the build needs (libmagic-dev, libqrencode-dev, libsmbclient-dev), when
# missing: one command works on a fresh machine (setup.sh asks for sudo for apt when needed).
scripts/setup.sh >&2

# The build runs as whoever ran this, with their PATH: `sudo make install` would lose the
# toolchain (sudo resets PATH) and leave root-owned files in .build.
if ! command -v swift >/dev/null 2>&1; then
  echo "install: swift is not on PATH${SUDO_USER:+ (sudo resets PATH)}. Run 'make install' as" \
    "yourself: it builds as you and asks for sudo only to copy the files." >&2
  exit 1
fi
swift build -c release --product browserdrop --static-swift-stdlib
bin=$(swift build -c release --show-bin-path)

# sudo only for copying, and only when the destination isn't writable by this user.
# A folder that doesn't exist yet counts as writable when its nearest existing parent is.
writable() {
  local path=$1
  while [[ ! -e "$path" ]]; do path=$(dirname "$path"); done
  [[ -d "$path" && -w "$path" ]]
}
as_root=()
if [[ $(id -u) -ne 0 ]]; then
  for dir in "$destdir$prefix/bin" "$destdir$prefix/share/doc/browserdrop/examples"; do
    if ! writable "$dir"; then
      echo "install: $destdir$prefix is not writable by $(id -un); copying with sudo." >&2
      command -v sudo >/dev/null 2>&1 \
        || { echo "install: sudo is missing; run this as root, or pick a PREFIX you own." >&2; exit 1; }
      as_root=(sudo)
      break
    fi
  done
fi

"${as_root[@]}" install -d "$destdir$prefix/bin" "$destdir$prefix/share/doc/browserdrop/examples"
"${as_root[@]}" install -m 0755 "$bin/browserdrop" "$destdir$prefix/bin/browserdrop"
"${as_root[@]}" install -m 0644 docs/command.md "$destdir$prefix/share/doc/browserdrop/command.md"
"${as_root[@]}" install -m 0644 Examples/Kiosk/browserdrop-kiosk.service Examples/Kiosk/README.md \
  "$destdir$prefix/share/doc/browserdrop/examples/"

echo "Installed $destdir$prefix/bin/browserdrop ($("$destdir$prefix/bin/browserdrop" --version))."

#!/usr/bin/env bash
# Builds the browserdrop command in release mode and installs it, with its documentation.
#
#   scripts/install.sh                 installs to /usr/local (bin/browserdrop, share/doc/browserdrop)
#   PREFIX=/opt/browserdrop scripts/install.sh
#   DESTDIR=/tmp/pkg scripts/install.sh  stages the files for a package
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
# missing: one command works on a fresh machine.
scripts/setup.sh >&2
swift build -c release --product browserdrop --static-swift-stdlib
bin=$(swift build -c release --show-bin-path)

install -d "$destdir$prefix/bin" "$destdir$prefix/share/doc/browserdrop/examples"
install -m 0755 "$bin/browserdrop" "$destdir$prefix/bin/browserdrop"
install -m 0644 docs/command.md "$destdir$prefix/share/doc/browserdrop/command.md"
install -m 0644 Examples/Kiosk/browserdrop-kiosk.service Examples/Kiosk/README.md \
  "$destdir$prefix/share/doc/browserdrop/examples/"

echo "Installed $destdir$prefix/bin/browserdrop ($("$destdir$prefix/bin/browserdrop" --version))."

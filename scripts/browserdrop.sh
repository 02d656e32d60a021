#!/usr/bin/env bash
# Sets up (Debian packages, release build) and runs browserdrop with the given arguments:
#   scripts/browserdrop.sh --to ~/Inbox
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh" >&2
swift build --package-path "$root" -c release --product browserdrop >&2
exec "$(swift build --package-path "$root" -c release --show-bin-path)/browserdrop" "$@"

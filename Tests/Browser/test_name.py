"""The page shows the device's name on the network once avahi-daemon publishes it.

The kiosk runs with --name on host A of a LAN of the test's own (Tests/Operations/lan.py: two
network namespaces, each with its own /run, D-Bus and avahi-daemon, joined by a veth pair).
Chromium runs on host B, as a phone on that network would: a namespace can't be reached from
127.0.0.1, so the browser goes to the kiosk's network rather than the kiosk to the browser's.
Opened by address, as the QR code has it, the page reads config.json's localName and shows "Also
at intake.local:PORT". Opened by that name (resolved on B with avahi-resolve), the page loads,
which means the Host rules admit it, and it does not repeat the name.
"""

import json
import pathlib
import queue
import signal
import subprocess
import sys
import threading
import time

from conftest import COMMAND_BINARY, ENGLISH, ROOT
from engines import CHROMEDRIVER, CHROMIUM

sys.path.insert(0, str(ROOT / "Tests/Operations"))
from lan import config_json, lan, needs_lan  # noqa: E402, F401 (lan is a fixture)

pytestmark = needs_lan

# Run by the venv's Python inside host B: Chromium through its driver, both on B's own loopback.
DRIVER = r"""
import json, sys, time
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

chromium, chromedriver, url, rules = sys.argv[1:5]
options = webdriver.ChromeOptions()
options.binary_location = chromium
for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--lang=en-US"):
    options.add_argument(argument)
if rules:
    options.add_argument("--host-resolver-rules=" + rules)
driver = webdriver.Chrome(options=options, service=Service(chromedriver))
driver.set_page_load_timeout(20)
try:
    driver.get(url)
    deadline = time.monotonic() + 20
    while driver.execute_script("return document.documentElement.dataset.ready") != "1":
        if time.monotonic() > deadline:
            raise SystemExit("the page never had its config.json")
        time.sleep(0.1)
    line = driver.find_element("id", "also-at")
    print(json.dumps({
        "shown": line.is_displayed(),
        "text": line.text,
        "name": driver.execute_script(
            "const s = document.querySelector('#also-at strong'); return s && s.textContent"),
        "host": driver.execute_script("return location.host"),
    }))
finally:
    driver.quit()
"""


class Kiosk:
    """browserdrop --kiosk --json --name NAME on `host`, its event lines read on a thread."""

    def __init__(self, host, tmp_path, name):
        self.process = subprocess.Popen(
            [*host.enter(), COMMAND_BINARY, "--kiosk", "--json", "--port", "0", "--staging",
             str(tmp_path / "staging"), "--to", str(tmp_path / "dest"), "--name", name],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.events = queue.Queue()
        self.seen = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            self.events.put(json.loads(line))

    def wait_for(self, predicate, what, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                event = self.events.get(timeout=0.5)
            except queue.Empty:
                continue
            self.seen.append(event)
            if predicate(event):
                return event
        raise AssertionError(f"no {what} in {timeout} s; events: {self.seen}")

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(timeout=60) == 0, self.process.stderr.read()


def open_page(host, url, rules=""):
    result = host.run(
        sys.executable, "-c", DRIVER, CHROMIUM, CHROMEDRIVER, url, rules, timeout=120, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_page_shows_the_published_name(lan, tmp_path):
    a, b = lan
    kiosk = Kiosk(a, tmp_path, "intake")
    try:
        listening = kiosk.wait_for(lambda e: e.get("event") == "listening", "listening")
        port = int(listening["addresses"][0]["url"].rsplit(":", 1)[1].rstrip("/"))
        kiosk.wait_for(
            lambda e: e.get("event") == "notice" and e["message"].startswith("Advertised as"),
            "the name published",
        )
        assert config_json(b, a.address, port)["localName"] == "intake.local"

        # By address, as the QR code has it: one line with the name to type, port included.
        seen = open_page(b, f"http://{a.address}:{port}/")
        assert seen["shown"], seen
        assert seen["name"] == f"intake.local:{port}"
        assert seen["text"] == ENGLISH["alsoAt"].replace("{name}", f"intake.local:{port}")

        # By the name, resolved on B through avahi-daemon, with and without the trailing dot:
        # the page loads (the Host rules admit it) and does not repeat the name.
        b.resolve("intake.local", a.address)
        rules = f"MAP intake.local {a.address}, MAP intake.local. {a.address}"
        for name in ["intake.local", "intake.local."]:
            seen = open_page(b, f"http://{name}:{port}/", rules)
            assert seen["host"] == f"{name}:{port}"
            assert not seen["shown"] and seen["name"] is None, seen
    finally:
        kiosk.stop()

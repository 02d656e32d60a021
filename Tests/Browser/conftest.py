"""Fixtures for the upload page's browser tests.

A real BrowserDropServer runs in BrowserDropTestHost (Tests/BrowserDropTestHost) on 127.0.0.1 with a
free port; the page is driven in headless Chromium through Selenium and chromedriver.

Environment:
  BROWSERDROP_TEST_HOST  the host binary (default: .build/debug/BrowserDropTestHost)
  BROWSERDROP_BINARY     the browserdrop command (default: next to the host)
  CHROMIUM, CHROMEDRIVER browser and driver (default: /usr/bin/chromium, /usr/bin/chromedriver)
"""

import hashlib
import json
import os
import pathlib
import subprocess
import threading
import time

import pytest
from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

ROOT = pathlib.Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"
HOST_BINARY = os.environ.get("BROWSERDROP_TEST_HOST", str(ROOT / ".build/debug/BrowserDropTestHost"))
# The command, built next to the host unless given.
COMMAND_BINARY = os.environ.get(
    "BROWSERDROP_BINARY", str(pathlib.Path(HOST_BINARY).parent / "browserdrop")
)
PAGE_DIR = ROOT / "Page"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")

# Keep Selenium Manager from looking for browsers or sending statistics.
os.environ.setdefault("SE_OFFLINE", "true")
os.environ.setdefault("SE_AVOID_STATS", "true")

# Every text of the page in English, as in the seed's "Customizing the page" table.
ENGLISH = {
    "title": "Upload files",
    "subtitle": "Send files from this computer to your device.",
    "dropTitle": "Drop files or folders here",
    "dropHint": "Folders keep their structure.",
    "chooseFiles": "Choose files",
    "chooseFolder": "Choose folder",
    "summaryEmpty": "No files yet.",
    "summary": "{done} of {total} uploaded",
    "queued": "Waiting",
    "uploading": "Uploading",
    "uploaded": "Uploaded",
    "failed": "Failed",
    "waitingForDevice": "Waiting for the device…",
    "deviceUnreachable": "Can't reach the device. Keep the upload screen open on it; "
    "uploads resume on their own.",
    "notEnoughSpace": "Not enough space on the device",
    "tooLarge": "Too large",
    "unsupported": "File type not supported",
    "pathConflict": "Another file or folder you sent has this name",
    "skipped": "Skipped because the type isn't supported: {count}",
    "retry": "Retry failed",
    "doneHint": "When you're done, confirm on your device to import the files.",
    "loadError": "Can't reach the device. Check that its upload screen is still open.",
}


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_file(path, size=None, text=None):
    """Creates a file of random bytes (or the given text) and returns its path."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if text is not None:
        path.write_text(text, encoding="utf-8")
    else:
        with open(path, "wb") as handle:
            left = size
            while left > 0:
                block = os.urandom(min(left, 1 << 20))
                handle.write(block)
                left -= len(block)
    return path


def assert_same_files(sent, folder):
    """sent maps relative paths to source files; every one must be byte-identical in folder."""
    assert folder, "the session handed over no folder"
    folder = pathlib.Path(folder)
    for relative, source in sent.items():
        target = folder / relative
        assert target.is_file(), f"{relative} is missing from {folder}"
        assert sha256(target) == sha256(source), f"{relative} differs from what was sent"
    on_disk = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert on_disk == sorted(sent), f"unexpected files in the session folder: {on_disk}"


class Host:
    """A running BrowserDropTestHost: JSON event lines in, commands out, stopped by its PID."""

    def __init__(self, staging, args, log_path):
        if not os.access(HOST_BINARY, os.X_OK):
            pytest.fail(
                f"test host not found at {HOST_BINARY}: run `swift build --product "
                "BrowserDropTestHost` or set BROWSERDROP_TEST_HOST"
            )
        self.log_path = log_path
        self._log = open(log_path, "w")
        self.process = subprocess.Popen(
            [HOST_BINARY, "--staging", str(staging), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            bufsize=1,
        )
        self.events = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        listening = self.wait_for("listening", timeout=30)
        self.url = listening["url"]

    def _read(self):
        for line in self.process.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                event = {"event": "unparsed", "line": line}
            with self._changed:
                self.events.append(event)
                self._changed.notify_all()
        with self._changed:
            self.events.append({"event": "exited"})
            self._changed.notify_all()

    def of(self, name, **fields):
        with self._changed:
            return [
                e
                for e in self.events
                if e.get("event") == name and all(e.get(k) == v for k, v in fields.items())
            ]

    def wait_until(self, predicate, timeout, what):
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                result = predicate(self.events)
                if result:
                    return result
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"timed out after {timeout} s waiting for {what}; events: {self.events[-30:]}"
                        f"; host log: {self.log_tail()}"
                    )
                self._changed.wait(min(left, 0.5))

    def wait_for(self, name, timeout=30, **fields):
        def found(events):
            # The wanted event first: "finish" makes the host print "finished" and exit, and a
            # waiter that wakes late sees both.
            for e in events:
                if e.get("event") == name and all(e.get(k) == v for k, v in fields.items()):
                    return e
            if any(e.get("event") == "exited" for e in events):
                raise AssertionError(f"the host exited; log: {self.log_tail()}")
            return None

        return self.wait_until(found, timeout, f"{name} {fields or ''}")

    def wait_count(self, name, count, timeout):
        return self.wait_until(
            lambda events: sum(1 for e in events if e.get("event") == name) >= count,
            timeout,
            f"{count} × {name}",
        )

    def send(self, command):
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()

    def finish(self, timeout=60):
        self.send("finish")
        return self.wait_for("finished", timeout=timeout)["folder"]

    def log_tail(self):
        try:
            return pathlib.Path(self.log_path).read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def stop(self):
        if self.process.poll() is None:
            try:
                self.process.stdin.close()  # end of input: the host cancels and exits
            except OSError:
                pass
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()  # SIGKILL to this PID only
                self.process.wait(timeout=10)
        self._log.close()


@pytest.fixture
def staging(tmp_path):
    path = tmp_path / "staging"
    path.mkdir()
    return path


@pytest.fixture
def start_host(staging, tmp_path):
    """start_host(*flags) runs a test host with these flags and returns it; stopped afterwards."""
    hosts = []

    def start(*args):
        host = Host(staging, list(args), tmp_path / f"host-{len(hosts)}.log")
        hosts.append(host)
        return host

    yield start
    for host in hosts:
        host.stop()


# Installed in every document of every test: records Content-Security-Policy violations, which
# the fixture turns into a failure (the console check sees them too; this names the directive).
CSP_WATCH = """
window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__cspViolations.push(
    `${e.effectiveDirective} refused ${e.blockedURI || 'inline code'} (${e.sourceFile}:${e.lineNumber})`);
});
"""

# Installed on demand (Page.record): watches what the page does from outside its code.
#   requests     upload requests sent, by path (decoded from the URL the page built)
#   bodies       the type of each upload body handed to XMLHttpRequest.send
#   maxInFlight  the most upload requests between send() and their end at any moment
#   texts        every text the state labels, reasons, notice, live region, summary and skipped line
#                showed on screen, in order (consecutive repeats once)
#   probeDelays  the delays the page asked for before each reachability check (its function is
#                named `probe`); with a scale > 1 they run that many times sooner
RECORDER = """
(() => {
  const SCALE = %s;
  const bd = (window.__bd = {
    requests: {}, bodies: [], inFlight: 0, maxInFlight: 0, probeDelays: [],
    texts: { state: [], reason: [], notice: [], live: [], summary: [], skipped: [] },
  });
  const open = XMLHttpRequest.prototype.open;
  const send = XMLHttpRequest.prototype.send;
  XMLHttpRequest.prototype.open = function (method, url, ...rest) {
    const match = /^upload\\?path=(.*)$/.exec(String(url));
    this.__bdPath = match ? decodeURIComponent(match[1]) : null;
    return open.call(this, method, url, ...rest);
  };
  XMLHttpRequest.prototype.send = function (body) {
    if (typeof this.__bdPath === 'string') {
      const path = this.__bdPath;
      bd.requests[path] = (bd.requests[path] || 0) + 1;
      bd.bodies.push(Object.prototype.toString.call(body));
      bd.inFlight += 1;
      bd.maxInFlight = Math.max(bd.maxInFlight, bd.inFlight);
      // readystatechange to DONE comes before load/error/abort, so before the page's handler
      // starts the next upload: an upload counts until its answer (or failure) is in.
      let counted = true;
      this.addEventListener('readystatechange', () => {
        if (this.readyState === XMLHttpRequest.DONE && counted) {
          counted = false;
          bd.inFlight -= 1;
        }
      });
    }
    return send.call(this, body);
  };
  const realSetTimeout = window.setTimeout;
  window.setTimeout = function (callback, delay, ...rest) {
    if (typeof callback === 'function' && callback.name === 'probe') {
      bd.probeDelays.push(delay);
      delay = delay / SCALE;
    }
    return realSetTimeout.call(window, callback, delay, ...rest);
  };
  const watched = [
    ['state', '.item-state'], ['reason', '.item-reason'], ['notice', '#notice-text'],
    ['live', '#live'], ['summary', '#summary'], ['skipped', '#skipped'],
  ];
  new MutationObserver((records) => {
    // Until the stylesheet has loaded nothing is painted (it blocks rendering), and the texts are
    // still index.html's, not yet the page's.
    const sheets = document.querySelectorAll('link[rel=stylesheet]').length;
    if (document.readyState === 'loading' || document.styleSheets.length < sheets) return;
    for (const record of records) {
      const node = record.target.nodeType === Node.ELEMENT_NODE ? record.target : record.target.parentElement;
      if (!node) continue;
      for (const [kind, selector] of watched) {
        const element = node.closest(selector);
        // Only what is on screen (display and visibility), at the end of the task that set it.
        const shown = element && element.checkVisibility({ visibilityProperty: true });
        const text = shown ? element.textContent.trim() : '';
        const list = bd.texts[kind];
        if (text && list[list.length - 1] !== text) list.push(text);
      }
    }
  }).observe(document, { subtree: true, childList: true, characterData: true });
})();
"""


class Page:
    """The upload page in a headless Chromium."""

    def __init__(self, driver):
        self.driver = driver

    # -- instrumentation
    def record(self, probe_scale=1):
        """Installs RECORDER in every document loaded from now on (before the page's own script)."""
        self.driver.execute_cdp_cmd(
            "Page.addScriptToEvaluateOnNewDocument", {"source": RECORDER % probe_scale}
        )

    def recorded(self):
        return self.js("return window.__bd")

    # -- navigation and waiting
    def open(self, url):
        self.driver.get(url)
        self.wait(lambda d: d.execute_script("return document.documentElement.dataset.ready === '1'"),
                  15, "the page to load config.json")

    def wait(self, condition, timeout, what):
        try:
            return WebDriverWait(self.driver, timeout, poll_frequency=0.1).until(condition)
        except TimeoutException:
            raise AssertionError(
                f"timed out after {timeout} s waiting for {what}; summary: {self.summary()!r}; "
                f"rows: {self.rows()}; notice: {self.notice()!r}"
            ) from None

    def js(self, script, *args):
        return self.driver.execute_script(script, *args)

    def wait_settled(self, total, timeout=60):
        """Waits until `total` rows exist and none is waiting or uploading."""
        return self.wait(
            lambda d: self.js(
                "const rows = document.querySelectorAll('#list .item');"
                "return rows.length === arguments[0] && "
                "[...rows].every(r => r.dataset.state === 'uploaded' || r.dataset.state === 'failed');",
                total,
            ),
            timeout,
            f"{total} files to settle",
        )

    # -- input
    def choose_files(self, paths):
        self.driver.find_element(By.ID, "file-input").send_keys("\n".join(str(p) for p in paths))

    def choose_folder(self, path):
        self.driver.find_element(By.ID, "folder-input").send_keys(str(path))

    def drop(self, paths):
        """A trusted drag and drop of disk files and folders onto the drop zone (CDP)."""
        x, y = self.js(
            "const zone = document.getElementById('drop');"
            "zone.scrollIntoView({block: 'center'});"
            "const r = zone.getBoundingClientRect();"
            "return [r.left + r.width / 2, r.top + r.height / 2];"
        )
        data = {"items": [], "files": [str(p) for p in paths], "dragOperationsMask": 1}
        for kind in ("dragEnter", "dragOver", "drop"):
            self.driver.execute_cdp_cmd(
                "Input.dispatchDragEvent", {"type": kind, "x": x, "y": y, "data": data}
            )

    # -- reading
    def summary(self):
        try:
            return self.js("return document.getElementById('summary').textContent")
        except Exception:  # noqa: BLE001 - only for diagnostics
            return None

    def notice(self):
        try:
            return self.js(
                "const n = document.getElementById('notice');"
                "return n.hidden ? '' : n.textContent.trim()"
            )
        except Exception:  # noqa: BLE001
            return None

    def rows(self):
        try:
            return self.js(
                "return [...document.querySelectorAll('#list .item')].map(r => ({"
                "path: r.dataset.path, state: r.dataset.state,"
                "name: r.querySelector('.item-name').textContent,"
                "label: r.querySelector('.item-state').textContent,"
                "reason: r.querySelector('.item-reason').textContent}))"
            )
        except Exception:  # noqa: BLE001
            return None

    def text(self, element_id):
        return self.js("return document.getElementById(arguments[0]).textContent.trim()", element_id)

    def visible(self, element_id):
        return self.driver.find_element(By.ID, element_id).is_displayed()

    def console_errors(self):
        """SEVERE browser log entries not caused by a network answer (4xx/5xx are expected)."""
        return [
            entry
            for entry in self.driver.get_log("browser")
            if entry.get("level") == "SEVERE" and entry.get("source") != "network"
        ]

    # -- artefacts
    def screenshot(self, name, width, height=900, dark=False, full=True):
        ARTIFACTS.mkdir(exist_ok=True)
        self.driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 500},
        )
        self.driver.execute_cdp_cmd(
            "Emulation.setEmulatedMedia",
            {"features": [{"name": "prefers-color-scheme", "value": "dark" if dark else "light"}]},
        )
        self.js("window.scrollTo(0, 0)")
        time.sleep(0.4)  # let the 200 ms bar transitions end before the picture
        path = ARTIFACTS / name
        if full:
            import base64

            shot = self.driver.execute_cdp_cmd(
                "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}
            )
            path.write_bytes(base64.b64decode(shot["data"]))
        else:
            self.driver.save_screenshot(str(path))
        return path


def new_driver():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--window-size=1000,900", "--lang=en-US"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(20)
    driver.set_script_timeout(20)
    return driver


@pytest.fixture
def page():
    """A fresh headless Chromium per test; fails the test on JavaScript console errors and on
    Content-Security-Policy violations."""
    driver = new_driver()
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": CSP_WATCH})
    view = Page(driver)
    try:
        yield view
        errors = view.console_errors()
        assert not errors, f"JavaScript console errors: {errors}"
        violations = view.js("return window.__cspViolations || []")
        assert not violations, f"Content-Security-Policy violations: {violations}"
    finally:
        driver.quit()

"""Fixtures for the upload page's browser tests.

A real BrowserDropServer runs in BrowserDropTestHost (Tests/BrowserDropTestHost) on 127.0.0.1 with a
free port; the page is driven in Chromium, Firefox and WebKit (engines.py). `page` is Chromium alone
(for the tests that need its DevTools protocol); `engine_page` is each engine in turn.

Environment:
  BROWSERDROP_TEST_HOST  the host binary (default: .build/debug/BrowserDropTestHost)
  BROWSERDROP_BINARY     the browserdrop command (default: next to the host)
  CHROMIUM, CHROMEDRIVER browser and driver (default: /usr/bin/chromium, /usr/bin/chromedriver)
  MINIBROWSER, WEBKITWEBDRIVER, FIREFOX   the other engines (defaults: Debian's paths)
  BROWSERDROP_ENGINES    the engines of engine_page, comma-separated (default: all three)
"""

import hashlib
import json
import os
import pathlib
import signal
import subprocess
import threading
import time

import pytest

from engines import (
    ENGINES, ERROR_CATCHER, EngineCannot, done_with, engine_for_test, stop_kept_engines, stop_xvfb,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"
HOST_BINARY = os.environ.get("BROWSERDROP_TEST_HOST", str(ROOT / ".build/debug/BrowserDropTestHost"))
# The command, built next to the host unless given.
COMMAND_BINARY = os.environ.get(
    "BROWSERDROP_BINARY", str(pathlib.Path(HOST_BINARY).parent / "browserdrop")
)
PAGE_DIR = ROOT / "Page"

# Keep Selenium Manager from looking for browsers or sending statistics.
os.environ.setdefault("SE_OFFLINE", "true")
os.environ.setdefault("SE_AVOID_STATS", "true")

# Every text of the page in English: the seed's "Customizing the page" table, then ours.
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
    # Ours, beyond the seed's table (issue 17).
    "folderUnsupported": "This browser can't choose folders here; drag the folder onto the page instead.",
    "keepScreenOn": "Large files take a while: keep this screen on until they are uploaded.",
    "iosOriginals": "Photos chosen from the photo library arrive as JPEG. To send the originals (HEIC), "
    "use Choose files and pick them in Files.",
    # Resumable uploads (issue 15): a file the browser can no longer read.
    "unreadable": "This file can't be read any more (moved, deleted or not a file). Choose it again.",
    # The device's name on the network (issue 19), with the port when there is one.
    "alsoAt": "Also at {name}",
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


def sparse(path, size):
    """A file of `size` zero bytes that takes no disk space: quick to make, read back as zeros."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.truncate(size)
    return path


class Paused:
    """The test host stopped (SIGSTOP to its PID, a process this test started) and continued: its
    sockets stay open and the kernel keeps queueing connections and bytes until its buffers are
    full, so the page's request hangs instead of failing, as when a device drops off Wi-Fi."""

    def __init__(self, host):
        self.pid = host.process.pid

    def __enter__(self):
        os.kill(self.pid, signal.SIGSTOP)
        return self

    def __exit__(self, *exc):
        os.kill(self.pid, signal.SIGCONT)


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
#   aborts       upload requests the page gave up on (abort()), by path
#   bodies       the type of each upload body handed to XMLHttpRequest.send
#   maxInFlight  the most upload requests between send() and their end at any moment
#   texts        every text the state labels, reasons, notice, live region, summary, skipped line,
#                keep-screen-on hint and folder hint showed on screen, in order (repeats once)
#   probeDelays  the delays the page asked for before each reachability check (its function is
#                named `probe`); with a scale > 1 they run that many times sooner
RECORDER = """
(() => {
  const SCALE = %s;
  const bd = (window.__bd = {
    requests: {}, aborts: {}, bodies: [], inFlight: 0, maxInFlight: 0, probeDelays: [],
    texts: { state: [], reason: [], notice: [], live: [], summary: [], skipped: [], keepAwake: [], folderHint: [] },
  });
  const open = XMLHttpRequest.prototype.open;
  const send = XMLHttpRequest.prototype.send;
  XMLHttpRequest.prototype.open = function (method, url, ...rest) {
    const match = /^upload\\?path=([^&]*)/.exec(String(url));
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
  const abort = XMLHttpRequest.prototype.abort;
  XMLHttpRequest.prototype.abort = function () {
    if (typeof this.__bdPath === 'string') bd.aborts[this.__bdPath] = (bd.aborts[this.__bdPath] || 0) + 1;
    return abort.call(this);
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
    ['keepAwake', '#keep-awake'], ['folderHint', '#folder-hint'],
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
    """The upload page in one browser engine (engines.py). `driver` is Selenium's for Chromium
    and WebKit (the Chromium-only tests use its DevTools commands), the BiDi client for Firefox."""

    def __init__(self, engine):
        self.engine = engine
        self.name = engine.name
        self.driver = getattr(engine, "driver", engine)

    def cannot(self, reason):
        """Skips the rest of a test this engine can't run here, saying why."""
        pytest.skip(f"{self.name}: {reason}")

    # -- instrumentation
    def record(self, probe_scale=1):
        """Installs RECORDER in every document loaded from now on: before the page's own script
        in Chromium and Firefox; in WebKit, whose driver has no such command, right after each
        load (it then sees everything the page does from that moment)."""
        self.engine.add_init_script(RECORDER % probe_scale)

    def recorded(self):
        return self.js("return window.__bd")

    # -- navigation and waiting
    def open(self, url):
        self.engine.get(url)
        self.wait(lambda d: d.execute_script("return document.documentElement.dataset.ready === '1'"),
                  15, "the page to load config.json")

    def wait(self, condition, timeout, what):
        """Polls condition(engine) every 0.1 s until it is true, for at most timeout seconds."""
        deadline = time.monotonic() + timeout
        while True:
            result = condition(self.engine)
            if result:
                return result
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"timed out after {timeout} s waiting for {what} ({self.name}); summary: "
                    f"{self.summary()!r}; rows: {self.rows()}; notice: {self.notice()!r}"
                )
            time.sleep(0.1)

    def js(self, script, *args):
        return self.engine.execute_script(script, *args)

    def title(self):
        return self.engine.title

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
        self.engine.set_files("file-input", paths)

    def choose_files_into(self, element_id, paths):
        self.engine.set_files(element_id, paths)

    def choose_folder(self, path):
        """Hands a folder to the folder input, as its chooser would; where the engine's driver
        can't, the test is skipped with the reason."""
        try:
            self.engine.set_folder("folder-input", path)
        except EngineCannot as reason:
            self.cannot(str(reason))

    def click(self, element_id):
        self.engine.click(element_id)

    def drop(self, paths):
        """A trusted drag and drop of disk files and folders onto the drop zone (CDP)."""
        if self.name != "chromium":
            self.cannot("no driver here sends a trusted drag of disk files and folders (only "
                        "Chromium's DevTools protocol does); drop_files drops files made in the page")
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

    def drop_files(self, paths):
        """A drop of disk files for any engine: a helper input of the test's own is given the
        files, and a DataTransfer holding them is dropped on the drop zone (dragenter, dragover,
        drop). Not trusted, and its items have no entries: it carries files, not folders."""
        self.js(
            "const input = document.createElement('input');"
            "input.type = 'file'; input.multiple = true; input.id = 'bd-drop-helper';"
            "input.hidden = true; document.body.append(input);"
        )
        self.engine.set_files("bd-drop-helper", paths)
        self.js(
            "const input = document.getElementById('bd-drop-helper');"
            "const data = new DataTransfer();"
            "for (const file of input.files) data.items.add(file);"
            "const zone = document.getElementById('drop');"
            "for (const type of ['dragenter', 'dragover', 'drop'])"
            "  zone.dispatchEvent(new DragEvent(type, {bubbles: true, cancelable: true, dataTransfer: data}));"
            "input.remove();"
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
        """Displayed: laid out with a size, not display:none or visibility:hidden."""
        return self.js(
            "const e = document.getElementById(arguments[0]);"
            "if (!e) return false;"
            "const r = e.getBoundingClientRect();"
            "return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility === 'visible';",
            element_id,
        )

    def console_errors(self):
        """Errors the page's code caused (not network answers: 4xx/5xx are expected)."""
        return self.engine.console_errors()

    # -- artefacts
    def screenshot(self, name, width, height=900, dark=False, full=True):
        """Saves artifacts/<name> in Chromium, artifacts/<engine>/<name> in the others."""
        folder = ARTIFACTS if self.name == "chromium" else ARTIFACTS / self.name
        folder.mkdir(parents=True, exist_ok=True)
        self.engine.set_viewport(width, height)
        if self.name == "chromium":
            self.driver.execute_cdp_cmd(
                "Emulation.setEmulatedMedia",
                {"features": [{"name": "prefers-color-scheme", "value": "dark" if dark else "light"}]},
            )
        elif dark:
            raise EngineCannot("only Chromium's DevTools protocol switches the colour scheme here")
        self.js("window.scrollTo(0, 0)")
        time.sleep(0.4)  # let the 200 ms bar transitions end before the picture
        path = folder / name
        self.engine.screenshot(path, full=full)
        return path


def _engine_page(name, tmp_path):
    engine = engine_for_test(name, tmp_path / f"{name}.log")
    engine.add_init_script(CSP_WATCH)
    if name == "webkit":
        engine.add_init_script(ERROR_CATCHER)
    view = Page(engine)
    try:
        yield view
        errors = view.console_errors()
        assert not errors, f"JavaScript console errors ({name}): {errors}"
        violations = view.js("return window.__cspViolations || []")
        assert not violations, f"Content-Security-Policy violations ({name}): {violations}"
    finally:
        done_with(engine)


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "cannot(engine=reason, ...): engines that can't run this test here, each with the reason "
        "(skipped before the browser starts)",
    )


@pytest.fixture(params=ENGINES)
def engine_page(request, tmp_path):
    """The page in each engine of ENGINES (chromium, firefox, webkit) in turn, a fresh browser per
    test; fails the test on errors the page's code caused and on CSP violations. A test marked
    @pytest.mark.cannot(webkit="why") is skipped in that engine, with the reason."""
    marker = request.node.get_closest_marker("cannot")
    if marker and request.param in marker.kwargs:
        pytest.skip(f"{request.param}: {marker.kwargs[request.param]}")
    yield from _engine_page(request.param, tmp_path)


@pytest.fixture
def page(tmp_path):
    """A fresh headless Chromium per test, for the tests that use its DevTools protocol; fails the
    test on JavaScript console errors and on Content-Security-Policy violations."""
    yield from _engine_page("chromium", tmp_path)


@pytest.fixture(scope="session", autouse=True)
def _stop_browsers_and_xvfb_at_the_end():
    yield
    stop_kept_engines()
    stop_xvfb()

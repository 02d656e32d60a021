"""The three browser engines the page is tested in, behind one small driver interface.

  chromium  Debian's chromium, headless, through chromedriver (Selenium)
  webkit    WebKitGTK's MiniBrowser through WebKitWebDriver (Selenium), on an Xvfb display the
            tests start (MiniBrowser has no headless mode)
  firefox   firefox-esr, headless, over WebDriver BiDi: Debian has no geckodriver, so BiDiDriver
            below is our own small client (a WebSocket and JSON commands)

Every driver offers what the engine-neutral tests use: get, execute_script (a function body that
sees `arguments`; promises are awaited), title, set_files, click, add_init_script,
console_errors, screenshot, set_viewport and quit. What an engine can't do here is said where it
is asked for (EngineCannot, turned into a pytest skip with the reason).
"""

import base64
import contextlib
import itertools
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service as ChromeService
from selenium.webdriver.common.by import By

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
MINIBROWSER = os.environ.get("MINIBROWSER", "/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser")
WEBKITDRIVER = os.environ.get("WEBKITWEBDRIVER", "/usr/bin/WebKitWebDriver")
FIREFOX = os.environ.get("FIREFOX", "/usr/bin/firefox-esr")

ALL_ENGINES = ("chromium", "firefox", "webkit")
# BROWSERDROP_ENGINES=chromium,webkit runs the engine-parametrised tests in those only.
ENGINES = tuple(
    e for e in os.environ.get("BROWSERDROP_ENGINES", ",".join(ALL_ENGINES)).split(",") if e
)

# Catches what a page's own code reports as an error, for engines whose driver has no console
# log (WebKitWebDriver): uncaught errors, unhandled rejections and console.error.
ERROR_CATCHER = """
if (!window.__bdErrors) {
  window.__bdErrors = [];
  window.addEventListener('error', (e) => window.__bdErrors.push(`${e.message} (${e.filename}:${e.lineno})`));
  window.addEventListener('unhandledrejection', (e) => window.__bdErrors.push(`unhandled rejection: ${e.reason}`));
  const original = console.error;
  console.error = function (...args) { window.__bdErrors.push(args.map(String).join(' ')); return original.apply(this, args); };
}
"""


class EngineCannot(Exception):
    """The engine (or its driver) can't do this here; the message says why."""


# ---------------------------------------------------------------------------------- Xvfb


class Xvfb:
    """An X server for MiniBrowser, on a display number it picks itself, stopped by its PID."""

    def __init__(self):
        read, write = os.pipe()
        self.process = subprocess.Popen(
            ["Xvfb", "-displayfd", str(write), "-screen", "0", "1280x1400x24", "-nolisten", "tcp"],
            pass_fds=(write,),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(write)
        number = b""
        deadline = time.monotonic() + 15
        with os.fdopen(read, "rb") as pipe:
            while not number.endswith(b"\n"):
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError("Xvfb did not start")
                chunk = pipe.read(1)
                if not chunk:
                    break
                number += chunk
        if not number.strip():
            raise RuntimeError("Xvfb did not say which display it took")
        self.display = ":" + number.decode().strip()

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


_xvfb = None
_xvfb_lock = threading.Lock()


def xvfb_display():
    """The display of the one Xvfb this test run starts (on first use); stopped at exit."""
    global _xvfb
    with _xvfb_lock:
        if _xvfb is None:
            _xvfb = Xvfb()
        return _xvfb.display


def stop_xvfb():
    global _xvfb
    with _xvfb_lock:
        if _xvfb is not None:
            _xvfb.stop()
            _xvfb = None


# ---------------------------------------------------------------------------------- Selenium engines


class SeleniumEngine:
    """Chromium and WebKit: Selenium's driver, with the few calls the tests need."""

    def __init__(self, name, driver):
        self.name = name
        self.driver = driver
        self._after_load = []  # WebKit: scripts run after each navigation (no preload scripts)

    def begin(self):
        """A fresh start for the next test (WebKit keeps its MiniBrowser between tests): a blank
        window of 1000 × 900, no scripts of the last test's. Each test's server has a port of its
        own, so the page's storage is another origin's anyway."""
        self._after_load = []
        self.driver.get("about:blank")
        self.driver.set_window_size(1000, 900)

    def end(self):
        self._after_load = []

    def root_pid(self):
        """The driver's process: the browser's processes are all below it."""
        return self.driver.service.process.pid

    def alive(self):
        try:
            self.driver.execute_script("return 1")
            return True
        except Exception:  # noqa: BLE001 - any failure means a new browser
            return False

    def get(self, url):
        self.driver.get(url)
        for source in self._after_load:
            self.driver.execute_script(source)

    def execute_script(self, script, *args):
        return self.driver.execute_script(script, *args)

    @property
    def title(self):
        return self.driver.title

    def add_init_script(self, source):
        """Runs source in every document loaded from now on: before the page's own scripts in
        Chromium; in WebKit, whose driver has no such command, right after each load."""
        if self.name == "chromium":
            self.driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": source})
        else:
            self._after_load.append(source)

    @property
    def init_scripts_run_before_the_page(self):
        return self.name == "chromium"

    def set_files(self, element_id, paths):
        self.driver.find_element(By.ID, element_id).send_keys("\n".join(str(p) for p in paths))

    def set_folder(self, element_id, path):
        if self.name == "webkit":
            raise EngineCannot(
                "WebKitWebDriver hands a folder to the input as one 0-byte file named after it, and "
                "WebKitGTK's own chooser picks no folder (test_folder_input_that_yields_no_folder)"
            )
        self.driver.find_element(By.ID, element_id).send_keys(str(path))

    def send_keys(self, element_id, text):
        self.driver.find_element(By.ID, element_id).send_keys(text)

    def click(self, element_id):
        self.driver.find_element(By.ID, element_id).click()

    def hide_page(self):
        """Another tab in front: the page's visibilityState becomes hidden (Chromium)."""
        if self.name == "webkit":
            raise EngineCannot("MiniBrowser opens a new tab as a window of its own, and the page stays visible")
        self._page_window = self.driver.current_window_handle
        self.driver.switch_to.new_window("tab")

    def show_page(self):
        self.driver.close()
        self.driver.switch_to.window(self._page_window)

    def console_errors(self):
        if self.name == "chromium":
            return [
                entry
                for entry in self.driver.get_log("browser")
                if entry.get("level") == "SEVERE" and entry.get("source") != "network"
            ]
        return self.driver.execute_script("return window.__bdErrors || []")

    def set_viewport(self, width, height):
        if self.name == "chromium":
            self.driver.execute_cdp_cmd(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 500},
            )
        else:
            self.driver.set_window_size(width, height)

    def screenshot(self, path, full=True):
        if self.name == "chromium" and full:
            shot = self.driver.execute_cdp_cmd(
                "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}
            )
            path.write_bytes(base64.b64decode(shot["data"]))
        else:
            self.driver.save_screenshot(str(path))

    def quit(self):
        self.driver.quit()


def chromium_driver():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--window-size=1000,900", "--lang=en-US"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=ChromeService(CHROMEDRIVER))
    driver.set_page_load_timeout(20)
    driver.set_script_timeout(20)
    return driver


def webkit_driver(log_path):
    from selenium.webdriver.webkitgtk.options import Options
    from selenium.webdriver.webkitgtk.service import Service

    os.environ["DISPLAY"] = xvfb_display()
    options = Options()
    options.binary_location = MINIBROWSER
    options.add_argument("--automation")  # without it the session fails to match capabilities
    log = open(log_path, "w")
    driver = webdriver.WebKitGTK(options=options, service=Service(WEBKITDRIVER, log_output=log))
    driver.set_page_load_timeout(20)
    driver.set_script_timeout(20)
    driver.set_window_size(1000, 900)
    return driver


# ---------------------------------------------------------------------------------- Firefox over BiDi

# Firefox talks to nothing but the test's own server: every other address goes to a proxy on a
# port of 127.0.0.1 where nothing listens (localhost itself is never proxied), and the services
# that call home at start-up are off.
FIREFOX_PREFS = {
    "network.proxy.type": 1,
    "network.proxy.http": "127.0.0.1",
    "network.proxy.http_port": 9,
    "network.proxy.ssl": "127.0.0.1",
    "network.proxy.ssl_port": 9,
    "network.proxy.share_proxy_settings": True,
    "network.proxy.allow_hijacking_localhost": False,
    "network.dns.disablePrefetch": True,
    "network.prefetch-next": False,
    "network.captive-portal-service.enabled": False,
    "network.connectivity-service.enabled": False,
    "browser.safebrowsing.malware.enabled": False,
    "browser.safebrowsing.phishing.enabled": False,
    "browser.safebrowsing.downloads.enabled": False,
    "browser.safebrowsing.blockedURIs.enabled": False,
    "browser.shell.checkDefaultBrowser": False,
    "browser.startup.homepage_override.mstone": "ignore",
    "browser.aboutwelcome.enabled": False,
    "datareporting.policy.dataSubmissionEnabled": False,
    "datareporting.healthreport.uploadEnabled": False,
    "toolkit.telemetry.enabled": False,
    "toolkit.telemetry.server": "",
    "app.normandy.enabled": False,
    "app.update.auto": False,
    "extensions.update.enabled": False,
    "extensions.getAddons.cache.enabled": False,
    "browser.search.update": False,
    "browser.region.network.url": "",
    "services.settings.server": "http://127.0.0.1:9/",
    "browser.newtabpage.enabled": False,
    "intl.accept_languages": "en-US",
}


class BiDiError(Exception):
    pass


class BiDiDriver:
    """A small WebDriver BiDi client for Firefox: one WebSocket, JSON commands, events kept."""

    def __init__(self, log_path, timeout=30):
        from websockets.sync.client import connect

        self.name = "firefox"
        self.timeout = timeout
        self.profile = tempfile.TemporaryDirectory(prefix="browserdrop-firefox-")
        with open(os.path.join(self.profile.name, "user.js"), "w") as prefs:
            for key, value in FIREFOX_PREFS.items():
                prefs.write(f"user_pref({json.dumps(key)}, {json.dumps(value)});\n")
        self._log = open(log_path, "w")
        self.process = subprocess.Popen(
            [FIREFOX, "--headless", "--no-remote", "--profile", self.profile.name,
             "--remote-debugging-port", "0", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group, stopped as one
        )
        address = self._wait_for_address(timeout)
        threading.Thread(target=self._copy_stderr, daemon=True).start()
        self._closing = contextlib.ExitStack()
        self.socket = self._closing.enter_context(
            connect(address + "/session", max_size=256 << 20, open_timeout=timeout)
        )
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.log_entries = []
        self._preload = []
        self.user_context = None
        self.command("session.new", {"capabilities": {"alwaysMatch": {"acceptInsecureCerts": False}}})
        self.command("session.subscribe", {"events": ["log.entryAdded"]})
        self.context = self.command("browsingContext.getTree", {})["contexts"][0]["context"]

    def begin(self):
        """A fresh start for the next test in the same Firefox: a user context of its own
        (storage, cookies and cache apart, like a new profile) with one tab, 1000 × 900."""
        self.user_context = self.command("browser.createUserContext", {})["userContext"]
        self.context = self.command(
            "browsingContext.create", {"type": "tab", "userContext": self.user_context}
        )["context"]
        self.log_entries = []
        self._preload = []
        self.set_viewport(1000, 900)

    def end(self):
        """Closes the test's user context (and its tabs) and forgets its preload scripts."""
        for script in self._preload:
            self.command("script.removePreloadScript", {"script": script})
        self._preload = []
        if self.user_context:
            self.command("browser.removeUserContext", {"userContext": self.user_context})
            self.user_context = None

    def _wait_for_address(self, timeout):
        found = {}

        def read():
            for line in self.process.stderr:
                self._log.write(line)
                match = re.search(r"WebDriver BiDi listening on (ws://\S+)", line)
                if match:
                    found["address"] = match.group(1)
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout)
        if "address" not in found:
            self.quit()
            raise RuntimeError(f"firefox did not open its WebDriver BiDi port within {timeout} s")
        return found["address"]

    def _copy_stderr(self):
        try:
            for line in self.process.stderr:
                self._log.write(line)
        except (OSError, ValueError):
            pass

    # -- protocol
    def command(self, method, params, timeout=None):
        with self._lock:
            ident = next(self._ids)
            self.socket.send(json.dumps({"id": ident, "method": method, "params": params}))
            deadline = time.monotonic() + (timeout or self.timeout)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BiDiError(f"{method}: no answer within {timeout or self.timeout} s")
                message = json.loads(self.socket.recv(timeout=left))
                if message.get("id") == ident:
                    if message.get("type") == "error":
                        raise BiDiError(f"{method}: {message.get('error')}: {message.get('message')}")
                    return message.get("result", {})
                if message.get("method") == "log.entryAdded":
                    self.log_entries.append(message["params"])

    # -- values
    @staticmethod
    def _local(value):
        if value is None:
            return {"type": "null"}
        if isinstance(value, bool):
            return {"type": "boolean", "value": value}
        if isinstance(value, (int, float)):
            return {"type": "number", "value": value}
        if isinstance(value, str):
            return {"type": "string", "value": value}
        if isinstance(value, (list, tuple)):
            return {"type": "array", "value": [BiDiDriver._local(v) for v in value]}
        if isinstance(value, dict):
            return {"type": "object", "value": [[str(k), BiDiDriver._local(v)] for k, v in value.items()]}
        raise TypeError(f"can't pass {type(value)} to the page")

    @staticmethod
    def _remote(value):
        kind = value.get("type")
        if kind in ("undefined", "null"):
            return None
        if kind in ("string", "boolean"):
            return value["value"]
        if kind == "number":
            number = value["value"]
            if isinstance(number, str):  # NaN, -0, Infinity
                return float(number.replace("-0", "0")) if number != "NaN" else float("nan")
            return number
        if kind in ("array", "set", "nodelist", "htmlcollection"):
            return [BiDiDriver._remote(v) for v in value.get("value", [])]
        if kind in ("object", "map"):
            return {
                (k if isinstance(k, str) else BiDiDriver._remote(k)): BiDiDriver._remote(v)
                for k, v in value.get("value", [])
            }
        if kind == "node":
            return {"sharedId": value.get("sharedId")}
        return value.get("value")

    # -- the interface the tests use
    def get(self, url):
        self.command("browsingContext.navigate", {"context": self.context, "url": url, "wait": "complete"})

    def execute_script(self, script, *args):
        result = self.command(
            "script.callFunction",
            {
                "functionDeclaration": "function () {\n" + script + "\n}",
                "arguments": [self._local(a) for a in args],
                "target": {"context": self.context},
                "awaitPromise": True,
                "resultOwnership": "none",
            },
        )
        if result.get("type") == "exception":
            details = result.get("exceptionDetails", {})
            raise BiDiError(f"script error: {details.get('text')}")
        return self._remote(result["result"])

    @property
    def title(self):
        return self.execute_script("return document.title")

    def add_init_script(self, source):
        params = {"functionDeclaration": "() => {\n" + source + "\n}"}
        if self.user_context:
            params["userContexts"] = [self.user_context]
        self._preload.append(self.command("script.addPreloadScript", params)["script"])

    init_scripts_run_before_the_page = True

    def _element(self, element_id):
        result = self.command(
            "script.evaluate",
            {
                "expression": f"document.getElementById({json.dumps(element_id)})",
                "target": {"context": self.context},
                "awaitPromise": False,
            },
        )
        node = result["result"]
        if node.get("type") != "node":
            raise BiDiError(f"no element #{element_id}")
        return {"sharedId": node["sharedId"]}

    def set_files(self, element_id, paths):
        self.command(
            "input.setFiles",
            {"context": self.context, "element": self._element(element_id), "files": [str(p) for p in paths]},
        )

    def set_folder(self, element_id, path):
        raise EngineCannot(
            "Firefox's input.setFiles refuses a folder (NS_ERROR_FILE_IS_DIRECTORY): a driver can't "
            "pick one; Firefox's own chooser does (with a confirmation), which no test can drive"
        )

    def click(self, element_id):
        """A real pointer click at the element's centre (trusted events)."""
        element = self._element(element_id)
        self.command(
            "input.performActions",
            {
                "context": self.context,
                "actions": [
                    {
                        "type": "pointer",
                        "id": "mouse",
                        "parameters": {"pointerType": "mouse"},
                        "actions": [
                            {"type": "pointerMove", "x": 0, "y": 0, "origin": {"type": "element", "element": element}},
                            {"type": "pointerDown", "button": 0},
                            {"type": "pointerUp", "button": 0},
                        ],
                    }
                ],
            },
        )
        self.command("input.releaseActions", {"context": self.context})

    def hide_page(self):
        """Another tab in front: the page's visibilityState becomes hidden."""
        self._other_tab = self.command("browsingContext.create", {"type": "tab"})["context"]

    def show_page(self):
        self.command("browsingContext.activate", {"context": self.context})
        self.command("browsingContext.close", {"context": self._other_tab})

    def alive(self):
        return self.process.poll() is None

    def root_pid(self):
        return self.process.pid

    def console_errors(self):
        self.execute_script("return 1")  # collects the events that arrived meanwhile
        return [
            e for e in self.log_entries
            if e.get("level") == "error" and e.get("source", {}).get("context") == self.context
        ]

    def set_viewport(self, width, height):
        self.command(
            "browsingContext.setViewport",
            {"context": self.context, "viewport": {"width": width, "height": height}},
        )

    def screenshot(self, path, full=True):
        data = self.command(
            "browsingContext.captureScreenshot",
            {"context": self.context, "origin": "document" if full else "viewport"},
        )["data"]
        path.write_bytes(base64.b64decode(data))

    def quit(self):
        try:
            if getattr(self, "socket", None) is not None:
                try:
                    self.command("browser.close", {}, timeout=5)
                except Exception:  # noqa: BLE001 - closing anyway
                    pass
                self._closing.close()
        finally:
            if self.process.poll() is None:
                try:
                    self.process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    os.killpg(self.process.pid, signal.SIGTERM)  # the group Firefox leads
                    try:
                        self.process.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        os.killpg(self.process.pid, signal.SIGKILL)
                        self.process.wait(timeout=10)
            self._log.close()
            self.profile.cleanup()


_kept = {}  # engine name → an engine kept between tests (Firefox, WebKit: their start is slow)
KEEP = ("firefox", "webkit")


def engine_for_test(name, log_path):
    """An engine ready for one test. Chromium starts anew each time (its DevTools overrides would
    outlive a test, and it starts in about a second); Firefox and WebKit are started once and
    given a fresh start per test (begin), a new one only if the last one died."""
    if name not in KEEP:
        return start_engine(name, log_path)
    engine = _kept.get(name)
    if engine is not None and not engine.alive():
        try:
            engine.quit()
        except Exception:  # noqa: BLE001 - it was dead already
            pass
        engine = None
    if engine is not None:
        try:
            engine.begin()
            return engine
        except Exception:  # noqa: BLE001 - it won't start afresh: replace it
            _kept.pop(name, None)
            try:
                engine.quit()
            except Exception:  # noqa: BLE001
                pass
    engine = _kept[name] = start_engine(name, log_path.parent.parent / f"{name}-kept.log")
    engine.begin()
    return engine


def done_with(engine):
    """After a test: a kept engine is tidied for the next; Chromium is stopped."""
    if engine.name in KEEP and _kept.get(engine.name) is engine:
        try:
            engine.end()
        except Exception:  # noqa: BLE001 - broken: the next test starts a new one
            _kept.pop(engine.name, None)
            engine.quit()
    else:
        engine.quit()


def stop_kept_engines():
    while _kept:
        _, engine = _kept.popitem()
        try:
            engine.quit()
        except Exception:  # noqa: BLE001 - stopping anyway
            pass


def start_engine(name, log_path):
    if name == "chromium":
        return SeleniumEngine("chromium", chromium_driver())
    if name == "webkit":
        return SeleniumEngine("webkit", webkit_driver(log_path))
    if name == "firefox":
        return BiDiDriver(log_path)
    raise ValueError(f"unknown engine {name}")

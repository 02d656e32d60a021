"""What issue 17 added to the page, in every engine (engine_page): folders an engine can't pick,
stalled uploads, the keep-screen-on hint, translated strings; and Chromium-only checks of what
needs its DevTools protocol (an iPhone's user agent, the tab hidden and shown again)."""

import json
import threading
import time

import pytest

from conftest import ENGLISH, Paused, assert_same_files, sparse, write_file
from engines import EngineCannot
from test_page import SPANISH, disguised_executable, summary

IPHONE = ("Mozilla/5.0 (iPhone; CPU iPhone OS 18_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
          "Version/18.5 Mobile/15E148 Safari/604.1")
# iPadOS asks for desktop pages: a Mac's user agent, told apart by its touch points.
IPAD = ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) "
        "Version/18.5 Safari/605.1.15")
NOT_CHROMIUM = "only Chromium's DevTools protocol overrides a page's user agent and touch points here"


def test_folder_input_that_yields_no_folder(start_host, engine_page, tmp_path):
    """A folder input that hands over no folder (WebKit: the folder as one 0-byte file named after
    it, as its driver does; Firefox: a loose file with no path inside a folder, as WebKitGTK's own
    chooser returns, set by its driver; Chromium: the same FileList given to the input by script,
    chromedriver handing a directory input nothing for a file) uploads nothing, says to drag the folder instead and stops
    offering the button; drag and drop still works afterwards (Chromium: a trusted drop of a real
    folder; the others: a drop of files)."""
    page = engine_page
    host = start_host()
    page.record()
    tree = tmp_path / "Album"
    sent = {
        "Album/a.bin": write_file(tree / "a.bin", 120_000),
        "Album/Disc 2/b.txt": write_file(tree / "Disc 2" / "b.txt", text="bee"),
    }
    page.open(host.url)
    if page.name == "webkit":
        # Known up front: WebKitGTK's chooser opens as "Select Files" and returns no folder.
        assert not page.visible("choose-folder"), "WebKit on Linux can't pick a folder: no button"
        page.engine.send_keys("folder-input", str(tree))  # what its driver does with a folder
    elif page.name == "firefox":
        assert page.visible("choose-folder")
        page.engine.set_files("folder-input", [sent["Album/a.bin"]])  # a file, no folder path
    else:
        # chromedriver hands a directory input nothing for a file path, so the file goes in
        # through a helper input and the folder input gets its FileList and a change event.
        assert page.visible("choose-folder")
        page.js(
            "const input = document.createElement('input');"
            "input.type = 'file'; input.id = 'bd-helper'; input.hidden = true;"
            "document.body.append(input);"
        )
        page.choose_files_into("bd-helper", [sent["Album/a.bin"]])
        page.js(
            "const folder = document.getElementById('folder-input');"
            "folder.files = document.getElementById('bd-helper').files;"
            "folder.dispatchEvent(new Event('change', {bubbles: true}));"
        )
    page.wait(lambda d: page.visible("folder-hint"), 10, "the folder hint")
    assert page.text("folder-hint") == ENGLISH["folderUnsupported"]
    assert not page.visible("choose-folder"), "the button is no longer offered"
    assert page.visible("choose-files") and page.visible("drop")
    assert page.rows() == [], "nothing from the folder input is listed"
    assert page.recorded()["requests"] == {}, "nothing from the folder input is sent"
    assert page.text("summary") == ENGLISH["summaryEmpty"]
    page.wait(lambda d: ENGLISH["folderUnsupported"] in page.text("live"), 5, "the hint to be announced")
    page.screenshot("page-folder-hint.png", 1000, full=False)

    if page.name == "chromium":
        page.drop([tree])
        expected = sent
    else:
        loose = write_file(tmp_path / "loose" / "song.bin", 50_000)
        page.drop_files([loose, sent["Album/a.bin"]])
        expected = {"song.bin": loose, "a.bin": sent["Album/a.bin"]}
    page.wait_settled(len(expected))
    assert sorted(r["path"] for r in page.rows()) == sorted(expected)
    assert all(r["state"] == "uploaded" for r in page.rows())
    host.wait_count("uploadFinished", len(expected), timeout=15)
    assert not host.of("uploadStarted", path="Album"), "a folder is never sent as a file"
    assert_same_files(expected, host.finish())


def test_stalled_upload_is_abandoned_and_sent_again(start_host, engine_page, tmp_path):
    """The server stops mid-body (its process paused): the upload's bytes stop moving, and after
    the stall time (1.5 s here through the page's test-only `bd-stall-ms`, 20 s by default) the
    page gives the request up, shows waitingForDevice, keeps the file in line (not failed), and
    sends it again (from its first byte, as protocol v1 has no resume) once the device answers."""
    page = engine_page
    host = start_host("--no-durability")
    page.record(probe_scale=10)
    page.open(host.url + "?bd-stall-ms=1500")
    big = sparse(tmp_path / "video.bin", 64 << 20)  # far more than the socket buffers hold
    with Paused(host):
        page.choose_files([big])
        page.wait(lambda d: page.notice() in (ENGLISH["waitingForDevice"], ENGLISH["deviceUnreachable"]),
                  20, "the page to notice the stall")
        recorded = page.recorded()
        assert recorded["aborts"] == {"video.bin": 1}, recorded["aborts"]
        assert recorded["requests"] == {"video.bin": 1}
        assert recorded["texts"]["notice"][0] == ENGLISH["waitingForDevice"]
        # Rows are drawn at the next animation frame.
        page.wait(lambda d: [r["state"] for r in page.rows()] == ["queued"], 5,
                  "the row back in line (a stalled upload is no failure)")
        labels = recorded["texts"]["state"]
        assert any(label.startswith(ENGLISH["uploading"] + " · ") for label in labels), labels
    page.wait_settled(1, timeout=60)
    assert page.rows()[0]["state"] == "uploaded"
    assert page.notice() == ""
    assert page.recorded()["requests"] == {"video.bin": 2}
    host.wait_count("uploadFinished", 1, timeout=30)
    assert_same_files({"video.bin": big}, host.finish())


def test_slow_but_moving_upload_is_never_cut(start_host, engine_page, tmp_path):
    """The server runs 15 ms of every 0.8 s (paused the rest), so the upload moves in spurts and
    takes longer than the stall time (3 s here) in all: as long as bytes move the page leaves it
    alone, one request, no abort, no notice."""
    page = engine_page
    host = start_host("--no-durability")
    page.record()
    page.open(host.url + "?bd-stall-ms=3000")
    big = sparse(tmp_path / "slow.bin", 80 << 20)
    stop = threading.Event()
    cycles = []

    paused = Paused(host)

    def throttle():
        # Paused already when the file is chosen, else a quiet machine sends it all at once.
        while True:
            stop.wait(0.8)
            paused.__exit__()
            cycles.append(1)
            time.sleep(0.015)
            if stop.is_set():
                return
            paused.__enter__()

    paused.__enter__()
    page.choose_files([big])
    throttler = threading.Thread(target=throttle, daemon=True)
    started = time.monotonic()
    throttler.start()
    try:
        page.wait_settled(1, timeout=90)
    finally:
        stop.set()
        throttler.join(timeout=10)
    took = time.monotonic() - started
    recorded = page.recorded()
    print(f"{page.name}: {took:.1f} s, {len(cycles)} pauses")
    assert page.rows()[0]["state"] == "uploaded"
    assert recorded["requests"] == {"slow.bin": 1} and recorded["aborts"] == {}, recorded
    assert recorded["texts"]["notice"] == [], "a moving upload is never taken for a lost device"
    assert took > 3 and len(cycles) >= 4, f"{took:.1f} s, {len(cycles)} pauses: no longer than the stall time"
    host.wait_count("uploadFinished", 1, timeout=30)
    assert_same_files({"slow.bin": big}, host.finish())


NO_PERMISSIONS = "only Chromium's DevTools protocol denies a permission here"


@pytest.mark.parametrize("wake_lock", [
    "allowed",
    pytest.param("refused", marks=pytest.mark.cannot(firefox=NO_PERMISSIONS, webkit=NO_PERMISSIONS)),
])
def test_keep_screen_on_hint_while_large_files_upload(start_host, engine_page, tmp_path, wake_lock):
    """While large files are on their way (50 MB to send by default; 1 byte here, through the
    test-only `bd-large-bytes`) the page asks for a screen wake lock where the browser has one and
    otherwise says to keep the screen on; when all is sent, neither. Chromium and Firefox grant the
    lock on 127.0.0.1 (a secure context); refused is the lock denied (Chromium's DevTools) as on a
    LAN http:// address, where there is none."""
    page = engine_page
    host = start_host("--max-concurrent", "1")
    if wake_lock == "refused":
        page.driver.execute_cdp_cmd("Browser.setPermission", {
            "permission": {"name": "screen-wake-lock"}, "setting": "denied", "origin": host.url.rstrip("/")})
    page.record()
    page.open(host.url + "?bd-large-bytes=1")
    assert not page.visible("keep-awake")
    files = [write_file(tmp_path / f"{i}.bin", 2_000_000) for i in range(6)]
    with Paused(host):  # holds the queue while the page is looked at
        page.choose_files(files)
        page.wait(lambda d: page.js("return document.documentElement.dataset.wakeLock") in ("held", "wanted"),
                  10, "the page to have asked for the screen to stay on")
        lock = page.js("return document.documentElement.dataset.wakeLock")
        if lock == "wanted":
            page.wait(lambda d: page.visible("keep-awake"), 5, "the keep-screen-on hint")
            assert page.text("keep-awake") == ENGLISH["keepScreenOn"]
            page.screenshot("page-keep-screen-on.png", 360, height=800, full=False)
            page.engine.set_viewport(1000, 900)
        else:
            assert not page.visible("keep-awake"), "a held wake lock needs no hint"
        print(f"{page.name}: wake lock {lock}")
        if wake_lock == "refused":
            assert lock == "wanted"
    page.wait_settled(6, timeout=60)
    assert page.js("return document.documentElement.dataset.wakeLock") == "off"
    assert not page.visible("keep-awake")
    host.wait_count("uploadFinished", 6, timeout=15)


def test_translated_strings(start_host, engine_page, tmp_path):
    """A Spanish table through config.json: the texts, lang and title, a row's states, refusals'
    reasons and the summary are Spanish, with nothing English left on screen. (Every one of the
    keys, loadError included, is checked in Chromium by test_every_string_translated_….)"""
    page = engine_page
    strings_file = tmp_path / "strings.json"
    strings_file.write_text(json.dumps(SPANISH), encoding="utf-8")
    host = start_host("--strings", str(strings_file), "--language", "es", "--title", "Mi App",
                      "--max-file-size", "100000", "--allow", "txt,bin,mp3")
    page.open(host.url)
    assert page.js("return document.documentElement.lang") == "es"
    assert page.title() == "Subir archivos · Mi App"
    for key, element in [("title", "heading"), ("dropTitle", "drop-title"), ("dropHint", "drop-hint"),
                         ("chooseFiles", "choose-files"), ("summaryEmpty", "summary")]:
        assert page.text(element) == SPANISH[key], key
    hola = write_file(tmp_path / "hola.txt", text="hola")
    grande = write_file(tmp_path / "grande.bin", 100_001)
    cancion = disguised_executable(tmp_path / "cancion.mp3")
    foto = write_file(tmp_path / "foto.png", 10)
    page.choose_files([hola, grande, cancion, foto])
    page.wait_settled(3)
    rows = {r["path"]: r for r in page.rows()}
    assert rows["hola.txt"]["label"] == SPANISH["uploaded"]
    assert (rows["grande.bin"]["label"], rows["grande.bin"]["reason"]) == (SPANISH["failed"], SPANISH["tooLarge"])
    assert (rows["cancion.mp3"]["label"], rows["cancion.mp3"]["reason"]) == (SPANISH["failed"], SPANISH["unsupported"])
    assert page.text("summary") == summary(1, 3, SPANISH)
    assert page.text("skipped") == SPANISH["skipped"].replace("{count}", "1")
    assert page.text("done") == SPANISH["doneHint"]
    shown = page.js("return document.body.innerText")
    for key, english in ENGLISH.items():
        fragment = max(english.replace("{", "}").split("}"), key=len).strip()
        assert fragment not in shown, f"English text of {key!r} shown: {fragment!r}"
    # The new hints are translated like the others, shown or not.
    for key, element in [("folderUnsupported", "folder-hint"), ("keepScreenOn", "keep-awake"),
                         ("iosOriginals", "ios-hint")]:
        assert page.text(element) == SPANISH[key], key
    page.screenshot("page-translated.png", 1000)
    host.wait_count("uploadFinished", 1, timeout=15)


@pytest.mark.cannot(webkit="MiniBrowser opens a new tab as a window of its own, and the page stays visible")
def test_back_in_sight_checks_for_the_device_at_once(start_host, engine_page, tmp_path):
    """The device went away and the page backs off (its next check 8 s away); the device is back
    while the tab is hidden; when the tab is shown again the page checks at once and the file goes
    up, before any scheduled check runs."""
    page = engine_page
    host = start_host()
    page.record(probe_scale=0.25)  # checks 4 times later than asked: 4 s, then 8 s
    page.open(host.url + "?bd-large-bytes=1")
    host.send("suspend")
    host.wait_for("suspended", timeout=30)
    later = write_file(tmp_path / "later.bin", 300_000)
    page.choose_files([later])
    page.wait(lambda d: len(page.recorded()["probeDelays"]) >= 2, 15, "two checks asked for")
    lock_before = page.js("return document.documentElement.dataset.wakeLock")
    page.js(
        "window.__seen = [];"
        "document.addEventListener('visibilitychange', () => window.__seen.push(document.visibilityState));"
    )
    host.send("resume")
    host.wait_for("resumed", timeout=30)
    try:
        page.engine.hide_page()
    except EngineCannot as reason:
        page.cannot(str(reason))
    time.sleep(0.5)  # hidden for a moment (Chromium's driver can only script the tab in front)
    page.engine.show_page()
    page.wait_settled(1, timeout=4)
    assert page.js("return window.__seen") == ["hidden", "visible"]
    assert page.rows()[0]["state"] == "uploaded"
    assert len(page.recorded()["probeDelays"]) == 2, "uploaded before any scheduled check ran"
    assert page.notice() == ""
    print(f"{page.name}: wake lock before hiding: {lock_before}")
    host.wait_count("uploadFinished", 1, timeout=15)
    assert_same_files({"later.bin": later}, host.finish())


@pytest.mark.cannot(firefox=NOT_CHROMIUM, webkit=NOT_CHROMIUM)
@pytest.mark.parametrize("device", ["iPhone", "iPad"])
def test_ios_hint_and_no_folder_button(start_host, engine_page, device):
    """On iOS and iPadOS (Safari's user agent and touch points, emulated) the page says to use
    Choose files for original photos (the photo library converts HEIC to JPEG) and offers no folder
    button (its picker returns files only); the hint is translated like every other string."""
    page = engine_page
    page.driver.execute_cdp_cmd("Emulation.setUserAgentOverride", {"userAgent": IPHONE if device == "iPhone" else IPAD})
    page.driver.execute_cdp_cmd("Emulation.setTouchEmulationEnabled", {"enabled": True, "maxTouchPoints": 5})
    host = start_host()
    page.open(host.url)
    assert page.js("return navigator.maxTouchPoints") == 5
    assert page.visible("ios-hint") and page.text("ios-hint") == ENGLISH["iosOriginals"]
    assert not page.visible("choose-folder") and page.visible("choose-files")
    assert not page.visible("folder-hint"), "nothing went wrong: the button is simply not offered"
    page.screenshot(f"page-ios-{device}.png", 390, height=844, full=False)
    strings_file = host.log_path.parent / "strings.json"
    strings_file.write_text(json.dumps(SPANISH), encoding="utf-8")
    spanish = start_host("--strings", str(strings_file), "--language", "es")
    page.open(spanish.url)
    assert page.text("ios-hint") == SPANISH["iosOriginals"]

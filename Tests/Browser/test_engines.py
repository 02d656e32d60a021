"""What issue 17 added to the page, in every engine (engine_page): folders an engine can't pick,
stalled uploads, the keep-screen-on hint, translated strings; and Chromium-only checks of what
needs its DevTools protocol (an iPhone's user agent, the tab hidden and shown again)."""

import json
import threading
import time

from conftest import ENGLISH, Paused, assert_same_files, sparse, write_file
from test_page import SPANISH, disguised_executable, summary


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
        (row,) = page.rows()
        assert row["state"] == "queued", "a stalled upload goes back in line, it is not a failure"
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
    takes several times the stall time (2 s here) in all: as long as bytes move the page leaves it
    alone, one request, no notice."""
    page = engine_page
    host = start_host("--no-durability")
    page.record()
    page.open(host.url + "?bd-stall-ms=2000")
    big = sparse(tmp_path / "slow.bin", 80 << 20)
    stop = threading.Event()
    cycles = []

    def throttle():
        while not stop.is_set():
            with Paused(host):
                stop.wait(0.8)
            cycles.append(1)
            time.sleep(0.015)

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
    assert took > 3, f"the upload took {took:.1f} s, not much longer than the stall time: throttle harder"
    host.wait_count("uploadFinished", 1, timeout=30)
    assert_same_files({"slow.bin": big}, host.finish())


def test_keep_screen_on_hint_while_large_files_upload(start_host, engine_page, tmp_path):
    """While large files are on their way (50 MB to send by default; 1 byte here, through the
    test-only `bd-large-bytes`) the page asks for a screen wake lock where the browser has one and
    otherwise says to keep the screen on; when all is sent, neither."""
    page = engine_page
    host = start_host("--max-concurrent", "1")
    page.record()
    page.open(host.url + "?bd-large-bytes=1")
    assert not page.visible("keep-awake")
    files = [write_file(tmp_path / f"{i}.bin", 2_000_000) for i in range(6)]
    with Paused(host):  # holds the queue while the page is looked at
        page.choose_files(files)
        page.wait(lambda d: page.js("return document.documentElement.dataset.wakeLock") in ("held", "wanted"),
                  10, "the page to want the screen on")
        lock = page.js("return document.documentElement.dataset.wakeLock")
        if lock == "wanted":
            page.wait(lambda d: page.visible("keep-awake"), 5, "the keep-screen-on hint")
            assert page.text("keep-awake") == ENGLISH["keepScreenOn"]
            page.screenshot("page-keep-screen-on.png", 360, height=800, full=False)
        else:
            assert not page.visible("keep-awake"), "a held wake lock needs no hint"
        print(f"{page.name}: wake lock {lock}")
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
    page.screenshot("page-translated.png", 1000)
    host.wait_count("uploadFinished", 1, timeout=15)

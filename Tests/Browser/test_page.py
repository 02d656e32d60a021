"""The bundled upload page against the real server: in every engine (engine_page) where the test
is engine-neutral, in Chromium (page) where it needs the DevTools protocol."""

import json
import os
import re
import shutil
import time

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from conftest import ENGLISH, PAGE_DIR, Paused, assert_same_files, write_file

SPANISH = {
    "title": "Subir archivos",
    "subtitle": "Envía archivos de este ordenador a tu dispositivo.",
    "dropTitle": "Suelta aquí archivos o carpetas",
    "dropHint": "Las carpetas mantienen su estructura.",
    "chooseFiles": "Elegir archivos",
    "chooseFolder": "Elegir carpeta",
    "summaryEmpty": "Aún no hay archivos.",
    "summary": "{done} de {total} subidos",
    "queued": "En espera",
    "uploading": "Subiendo",
    "uploaded": "Subido",
    "failed": "Error",
    "waitingForDevice": "Esperando al dispositivo…",
    "deviceUnreachable": "No se puede conectar con el dispositivo. Deja abierta en él la pantalla "
    "de subida; las subidas siguen solas.",
    "notEnoughSpace": "No hay espacio suficiente en el dispositivo",
    "tooLarge": "Demasiado grande",
    "unsupported": "Tipo de archivo no admitido",
    "pathConflict": "Otro archivo o carpeta que enviaste tiene este nombre",
    "skipped": "Omitidos porque el tipo no se admite: {count}",
    "retry": "Reintentar los fallidos",
    "doneHint": "Cuando termines, confírmalo en tu dispositivo para importar los archivos.",
    "loadError": "No se encuentra el dispositivo. Comprueba que su pantalla de subida sigue abierta.",
    "folderUnsupported": "Este navegador no puede elegir carpetas aquí; arrastra la carpeta a la página.",
    "keepScreenOn": "Los archivos grandes tardan: mantén esta pantalla encendida hasta que se suban.",
    "iosOriginals": "Las fotos elegidas de la fototeca llegan como JPEG. Para enviar los originales (HEIC), "
    "usa Elegir archivos y elígelas en Archivos.",
    "unreadable": "Ya no se puede leer este archivo (movido, borrado o no es un archivo). Vuelve a elegirlo.",
}


def summary(done, total, strings=ENGLISH):
    return strings["summary"].replace("{done}", str(done)).replace("{total}", str(total))


def disguised_executable(path):
    """An ELF executable (a copy of /bin/true) under a name that says something else."""
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile("/bin/true", path)
    return path


def test_default_strings_are_the_seed_table(page):
    """DEFAULT_STRINGS in app.js is exactly the seed's table plus our keys (ENGLISH): every key,
    same text."""
    source = (PAGE_DIR / "app.js").read_text(encoding="utf-8")
    literal = re.search(r"const DEFAULT_STRINGS = (\{.*?\n  \});", source, re.S)
    assert literal, "DEFAULT_STRINGS not found in Page/app.js"
    page.driver.get("about:blank")
    assert page.js(f"return {literal.group(1)};") == ENGLISH


def test_choose_several_files(start_host, engine_page, tmp_path):
    page = engine_page
    host = start_host()
    src = tmp_path / "src"
    files = {
        "random.bin": write_file(src / "random.bin", 3 * 1024 * 1024 + 17),
        "empty.txt": write_file(src / "empty.txt", text=""),
        "spaced ünï name.txt": write_file(src / "spaced ünï name.txt", text="hello ünïcode\n"),
        "100% & #hash?.txt": write_file(src / "100% & #hash?.txt", text="reserved URL characters"),
    }
    page.open(host.url)
    assert page.text("summary") == ENGLISH["summaryEmpty"]
    page.choose_files(files.values())
    page.wait_settled(len(files))
    assert page.text("summary") == summary(4, 4)
    assert {r["path"]: r["state"] for r in page.rows()} == {p: "uploaded" for p in files}
    assert all(r["label"] == ENGLISH["uploaded"] for r in page.rows())
    assert page.visible("done") and page.text("done") == ENGLISH["doneHint"]
    assert not page.visible("retry") and not page.visible("skipped")
    page.screenshot("page-files-uploaded.png", 1000)
    host.wait_count("uploadFinished", 4, timeout=15)
    assert_same_files(files, host.finish())


FOLDER_BY_DRIVER = {
    "firefox": "input.setFiles refuses a folder (NS_ERROR_FILE_IS_DIRECTORY), so no driver picks one; "
    "Firefox's own chooser does, after a confirmation no test can drive",
    "webkit": "WebKitWebDriver turns a folder into one 0-byte file named after it, and WebKitGTK's "
    "chooser picks no folder (test_folder_input_that_yields_no_folder checks what the page does)",
}
TRUSTED_DROP = (
    "no trusted drag of disk files or folders through its driver (only Chromium's DevTools "
    "protocol has one); test_folder_input_that_yields_no_folder drops files made in the page"
)


@pytest.mark.cannot(**FOLDER_BY_DRIVER)
def test_choose_folder_keeps_structure(start_host, engine_page, tmp_path):
    page = engine_page
    # With a list of allowed extensions, so a hidden file that were not left out first would show
    # up either as a row (.notes.txt) or in the skipped count (.DS_Store, .git/config).
    host = start_host("--allow", "bin,txt")
    tree = tmp_path / "Book"
    sent = {
        "Book/01 Intro.bin": write_file(tree / "01 Intro.bin", 200_000),
        "Book/Part 1/02.bin": write_file(tree / "Part 1" / "02.bin", 1_500_000),
        "Book/Part 1/deeper/03.txt": write_file(tree / "Part 1" / "deeper" / "03.txt", text="three"),
    }
    write_file(tree / ".DS_Store", 64)  # hidden files are left out silently
    write_file(tree / ".notes.txt", text="hidden, allowed extension")
    write_file(tree / ".git" / "config", text="[core]")
    write_file(tree / ".git" / "HEAD.txt", text="ref")
    page.open(host.url)
    page.choose_folder(tree)
    page.wait_settled(3)
    assert page.text("summary") == summary(3, 3)
    assert sorted(r["path"] for r in page.rows()) == sorted(sent)
    assert not page.visible("skipped"), "hidden files must not count as skipped"
    host.wait_count("uploadFinished", 3, timeout=15)
    assert sorted(e["path"] for e in host.of("uploadStarted")) == sorted(sent)
    assert_same_files(sent, host.finish())


@pytest.mark.cannot(firefox=TRUSTED_DROP, webkit=TRUSTED_DROP)
def test_drag_and_drop_files_and_folder(start_host, engine_page, tmp_path):
    """A trusted CDP drag and drop onto the drop zone: Chromium fires the real dragenter/dragover/
    drop events, so the page's own drop handler runs (handleDrop: webkitGetAsEntry(), readEntries()
    until empty). Only the OS hand-off before it (a drag from a file manager) is not driven."""
    page = engine_page
    host = start_host("--allow", "bin,txt")
    src = tmp_path / "src"
    loose = write_file(src / "loose.bin", 700_000)
    tree = src / "tree"
    sent = {
        "loose.bin": loose,
        "tree/a.bin": write_file(tree / "a.bin", 300_000),
        "tree/sub1/b.txt": write_file(tree / "sub1" / "b.txt", text="bee"),
        "tree/sub1/deeper/c.bin": write_file(tree / "sub1" / "deeper" / "c.bin", 1_000_001),
        "tree/sub2/d.txt": write_file(tree / "sub2" / "d.txt", text="dee"),
    }
    write_file(tree / "sub2" / ".DS_Store", 10)
    write_file(tree / ".hidden" / "e.txt", text="inside a hidden folder")
    page.open(host.url)
    page.drop([loose, tree])
    page.wait_settled(len(sent))
    assert sorted(r["path"] for r in page.rows()) == sorted(sent)
    assert page.text("summary") == summary(5, 5)
    assert not page.visible("skipped"), "hidden files are left out silently, not counted"
    host.wait_count("uploadFinished", 5, timeout=15)
    # The folder itself (listed by dataTransfer.files as a 4 KiB pseudo-file) was never uploaded.
    assert not host.of("uploadStarted", path="tree")
    assert_same_files(sent, host.finish())


def test_unsupported_types_are_skipped_with_count(start_host, engine_page, tmp_path):
    page = engine_page
    host = start_host("--allow", "txt,csv")
    src = tmp_path / "src"
    sent = {
        "a.txt": write_file(src / "a.txt", text="alpha"),
        "b.CSV": write_file(src / "b.CSV", text="x,y\n1,2\n"),
    }
    others = [write_file(src / "c.exe", 100), write_file(src / "d.jpg", 100),
              write_file(src / "Makefile", text="all:")]
    page.open(host.url)
    page.choose_files([*sent.values(), *others])
    page.wait_settled(2)
    assert page.visible("skipped")
    assert page.text("skipped") == ENGLISH["skipped"].replace("{count}", "3")
    assert sorted(r["path"] for r in page.rows()) == ["a.txt", "b.CSV"]
    host.wait_count("uploadFinished", 2, timeout=15)
    assert len(host.of("uploadStarted")) == 2, "skipped files must never reach the server"
    assert_same_files(sent, host.finish())


def test_disguised_executable_is_refused_while_it_streams(start_host, engine_page, tmp_path):
    page = engine_page
    """/bin/true followed by 24 MiB, named clip.mp4: the server refuses it once its first 64 KiB
    are in, while the page is still sending; the page shows why, and does not offer a retry."""
    host = start_host()
    src = tmp_path / "src"
    honest = write_file(src / "notes.txt", text="plain text\n")
    disguised = src / "clip.mp4"
    with open("/bin/true", "rb") as elf, open(disguised, "wb") as out:
        out.write(elf.read())
        out.write(bytes(24 << 20))
    page.open(host.url)
    page.choose_files([honest, disguised])
    page.wait_settled(2)
    rows = {r["path"]: r for r in page.rows()}
    assert rows["notes.txt"]["state"] == "uploaded"
    assert rows["clip.mp4"]["state"] == "failed"
    assert rows["clip.mp4"]["reason"] == ENGLISH["unsupported"]
    assert not page.visible("retry"), "a disguised file cannot be retried"
    host.wait_count("uploadFinished", 1, timeout=15)
    failed = host.wait_for("uploadFailed", timeout=15, path="clip.mp4")
    assert failed["reason"] == "unsupportedType"
    assert failed["detail"].startswith("This file is an ELF "), failed
    assert_same_files({"notes.txt": honest}, host.finish())


def test_too_large_before_upload(start_host, engine_page, tmp_path):
    page = engine_page
    host = start_host("--max-file-size", "100000")
    small = write_file(tmp_path / "small.bin", 100_000)
    big = write_file(tmp_path / "big.bin", 100_001)
    page.open(host.url)
    page.choose_files([small, big])
    page.wait_settled(2)
    rows = {r["path"]: r for r in page.rows()}
    assert rows["small.bin"]["state"] == "uploaded"
    assert rows["big.bin"]["state"] == "failed"
    assert rows["big.bin"]["label"] == ENGLISH["failed"]
    assert rows["big.bin"]["reason"] == ENGLISH["tooLarge"]
    assert not page.visible("retry"), "a file that is too large cannot be retried"
    host.wait_count("uploadFinished", 1, timeout=15)
    assert not host.of("uploadStarted", path="big.bin"), "the page must not send a file too large"
    assert_same_files({"small.bin": small}, host.finish())


# Hides maximumFileSize from the page (as if config.json were stale), so the server must refuse.
HIDE_LIMIT = """
const realFetch = window.fetch;
window.fetch = async (...args) => {
  const response = await realFetch(...args);
  if (!String(args[0]).includes('config.json')) return response;
  const config = await response.clone().json();
  delete config.maximumFileSize;
  return new Response(JSON.stringify(config), {status: 200, headers: {'Content-Type': 'application/json'}});
};
"""


@pytest.mark.cannot(webkit="the limit must be hidden from config.json before the page reads it, and "
                    "WebKitWebDriver runs no script before the page's own")
def test_too_large_refused_by_server_413(start_host, engine_page, tmp_path):
    page = engine_page
    host = start_host("--max-file-size", "100000")
    page.engine.add_init_script(HIDE_LIMIT)
    page.record()
    small = write_file(tmp_path / "ok.bin", 5_000)
    big = write_file(tmp_path / "huge.bin", 8_000_000)  # larger than socket buffers
    page.open(host.url)
    assert page.js("return document.getElementById('file-input') !== null")
    page.choose_files([small, big])
    page.wait_settled(2, timeout=30)
    rows = {r["path"]: r for r in page.rows()}
    assert rows["ok.bin"]["state"] == "uploaded"
    assert rows["huge.bin"]["state"] == "failed", rows
    assert rows["huge.bin"]["reason"] == ENGLISH["tooLarge"]
    assert page.notice() == "", "a 413 is a refusal, not a lost connection"
    assert not page.visible("retry"), "a file that is too large cannot be retried"
    # A refusal is final: the row is failed (nothing re-queues it on its own) after one request.
    assert page.recorded()["requests"] == {"ok.bin": 1, "huge.bin": 1}
    host.wait_count("uploadFinished", 1, timeout=15)
    assert_same_files({"ok.bin": small}, host.finish())


def test_not_enough_space_and_retry_failed(start_host, engine_page, tmp_path):
    page = engine_page
    # Asking the server to keep a petabyte free makes every upload answer 507.
    host = start_host("--reserved-free-space", str(10**15))
    one = write_file(tmp_path / "one.txt", text="1")
    page.record()
    page.open(host.url)
    page.choose_files([one])
    page.wait_settled(1)
    (row,) = page.rows()
    assert (row["state"], row["reason"]) == ("failed", ENGLISH["notEnoughSpace"])
    assert page.visible("retry") and page.text("retry") == ENGLISH["retry"]
    assert not page.visible("done")
    # A 507 comes back within milliseconds: count the upload requests the page sends instead.
    assert page.recorded()["requests"] == {"one.txt": 1}
    page.click("retry")
    page.wait(lambda d: page.recorded()["requests"] == {"one.txt": 2}, 10, "the retry to be sent")
    page.wait_settled(1)
    # Once seen failing here without a reason under CI load (not reproduced alone): say why.
    row = page.rows()[0]
    assert row["reason"] == ENGLISH["notEnoughSpace"], (row, page.recorded(), host.events[-8:])
    host.send("cancel")
    host.wait_for("cancelled", timeout=15)


def test_refusals_show_their_reason_and_retry_failed_resends_only_what_can_change(
    start_host, page, tmp_path
):
    """409, 400 unsupported_type and a file over the limit each show their reason and are not sent
    again on their own; Retry failed, pressed from the keyboard, sends only the conflict again."""
    host = start_host("--max-file-size", "100000")
    page.record()
    first = write_file(tmp_path / "a" / "x", text="a file called x")
    folder = tmp_path / "b" / "x"
    write_file(folder / "y.txt", text="a file inside a folder called x")
    song = disguised_executable(tmp_path / "c" / "song.mp3")
    big = write_file(tmp_path / "c" / "big.bin", 100_001)
    page.open(host.url)
    page.choose_files([first])
    page.wait_settled(1)
    page.choose_folder(folder)
    page.wait_settled(2)
    page.choose_files([song, big])
    page.wait_settled(4)
    rows = {r["path"]: r for r in page.rows()}
    assert rows["x"]["state"] == "uploaded"
    assert (rows["x/y.txt"]["label"], rows["x/y.txt"]["reason"]) == (ENGLISH["failed"], ENGLISH["pathConflict"])
    assert (rows["song.mp3"]["label"], rows["song.mp3"]["reason"]) == (ENGLISH["failed"], ENGLISH["unsupported"])
    assert (rows["big.bin"]["label"], rows["big.bin"]["reason"]) == (ENGLISH["failed"], ENGLISH["tooLarge"])
    assert page.text("summary") == summary(1, 4)
    assert page.recorded()["requests"] == {"x": 1, "x/y.txt": 1, "song.mp3": 1}, "big.bin is never sent"
    assert page.visible("retry") and page.text("retry") == ENGLISH["retry"]

    # Keyboard only: Tab from the last control before it, then Enter.
    page.js("document.getElementById('choose-folder').focus()")
    ActionChains(page.driver).send_keys(Keys.TAB).perform()
    assert page.js("return document.activeElement.id") == "retry"
    ActionChains(page.driver).send_keys(Keys.ENTER).perform()
    page.wait(lambda d: page.recorded()["requests"].get("x/y.txt") == 2, 10, "the conflict to be sent again")
    # Retry failed queues everything it retries at once, so anything else would be counted by now.
    assert page.recorded()["requests"] == {"x": 1, "x/y.txt": 2, "song.mp3": 1}
    page.wait_settled(4)
    rows = {r["path"]: r for r in page.rows()}
    assert rows["x/y.txt"]["reason"] == ENGLISH["pathConflict"]
    assert rows["song.mp3"]["reason"] == ENGLISH["unsupported"]
    assert_same_files({"x": first}, host.finish())


def test_suspend_mid_queue_then_resume(start_host, page, tmp_path):
    """The host suspends its server while the queue runs; the page waits and finishes by itself."""
    host = start_host()
    src = tmp_path / "many"
    count = 48
    sent = {f"many/{i:02d}.bin": write_file(src / f"{i:02d}.bin", 3 * 1024 * 1024) for i in range(count)}
    page.record()
    page.open(host.url)
    page.choose_folder(src)
    host.wait_count("uploadFinished", 4, timeout=60)
    host.send("suspend")
    host.wait_for("suspended", timeout=30)
    finished_before = len(host.of("uploadFinished"))
    assert finished_before < count, "the queue ended before the suspend: make it longer"
    print(f"suspended after {finished_before} of {count} files")

    page.wait(lambda d: page.notice() in (ENGLISH["waitingForDevice"], ENGLISH["deviceUnreachable"]),
              15, "the page to notice the device is gone")
    page.wait(lambda d: page.notice() == ENGLISH["deviceUnreachable"], 20,
              "the page to say the device can't be reached")
    page.screenshot("page-device-unreachable.png", 1000, full=False)
    assert page.text("summary") != summary(count, count)
    assert not any(r["state"] == "failed" for r in page.rows()), "lost connections are not failures"

    host.send("resume")
    host.wait_for("resumed", timeout=30)
    page.wait_settled(count, timeout=120)
    assert page.text("summary") == summary(count, count)
    assert page.notice() == ""
    # The end is announced a moment after the last row settles (the live region is cleared first).
    page.wait(lambda d: ENGLISH["doneHint"] in page.text("live"), 5, "the end to be announced")
    recorded = page.recorded()
    # The default maximumConcurrentUploads (3), before and after the pause.
    assert recorded["maxInFlight"] == 3
    assert set(recorded["bodies"]) == {"[object File]"}, "each body is the File itself (streamed)"
    # The live region: lost and back, each quarter of the batch, then the end.
    live = recorded["texts"]["live"]
    assert ENGLISH["waitingForDevice"] in live and ENGLISH["deviceUnreachable"] in live
    for quarter in (1, 2, 3):
        low, high = quarter * count // 4, (quarter + 1) * count // 4
        assert any(summary(done, count) in live for done in range(low, high)), (quarter, live)
    assert live[-1].startswith(summary(count, count)) and live[-1].endswith(ENGLISH["doneHint"])
    host.wait_count("uploadFinished", count, timeout=30)
    assert_same_files(sent, host.finish())


@pytest.mark.parametrize("limit, expected", [(2, 2), (8, 6)])
def test_queue_runs_at_most_maximum_concurrent_uploads(start_host, engine_page, tmp_path, limit, expected):
    """The queue never has more upload requests open than config.json's maximumConcurrentUploads
    (and never more than 6, the connections Chromium opens to one host); the rest show Waiting."""
    page = engine_page
    host = start_host("--max-concurrent", str(limit))
    page.record()
    src = tmp_path / "batch"
    count = 12
    sent = {f"{i:02d}.bin": write_file(src / f"{i:02d}.bin", 4 * 1024 * 1024 + i) for i in range(count)}
    page.open(host.url)
    assert page.js("return fetch('config.json').then(r => r.json())")["maximumConcurrentUploads"] == limit
    # Paused at first, so that rows are seen waiting in every engine, however late it paints.
    with Paused(host):
        page.choose_files(sent.values())
        page.wait(lambda d: any(r["label"] == ENGLISH["queued"] for r in page.rows()), 10, "rows waiting")
    page.wait_settled(count)
    recorded = page.recorded()
    assert recorded["maxInFlight"] == expected
    assert recorded["requests"] == {path: 1 for path in sent}
    assert set(recorded["bodies"]) == {"[object File]"}
    labels = recorded["texts"]["state"]
    assert ENGLISH["queued"] in labels
    assert any(label.startswith(ENGLISH["uploading"] + " · ") and label.endswith("%") for label in labels)
    assert ENGLISH["uploaded"] in labels
    # Every row's bar is a labelled progress bar, full at the end.
    bars = page.js(
        "return [...document.querySelectorAll('#list .item')].map(r => {"
        "const b = r.querySelector('.bar'); return [r.dataset.path, b.getAttribute('role'),"
        "b.getAttribute('aria-label'), b.getAttribute('aria-valuenow')]; })"
    )
    assert sorted(bars) == sorted([path, "progressbar", path, "100"] for path in sent)
    host.wait_count("uploadFinished", count, timeout=15)
    assert_same_files(sent, host.finish())


def test_backoff_while_the_device_is_away_then_resumes_by_itself(start_host, page, tmp_path):
    """The server is suspended before a file is chosen, so its upload is refused at connect. The
    page asks to check again after 1, 2, 4, 8, 16 and then every 30 s (the delays it asks for are
    recorded; they run 20 times sooner here), shows waitingForDevice then deviceUnreachable, marks
    nothing failed, sends nothing meanwhile, and uploads the file by itself after resume."""
    host = start_host()
    page.record(probe_scale=20)
    page.open(host.url)
    host.send("suspend")
    host.wait_for("suspended", timeout=30)
    later = write_file(tmp_path / "later.bin", 500_000)
    page.choose_files([later])
    page.wait(lambda d: len(page.recorded()["probeDelays"]) >= 8, 30, "eight reachability checks")
    recorded = page.recorded()
    assert recorded["probeDelays"][:8] == [1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]
    assert recorded["texts"]["notice"][:2] == [ENGLISH["waitingForDevice"], ENGLISH["deviceUnreachable"]]
    assert ENGLISH["waitingForDevice"] in recorded["texts"]["live"]
    assert ENGLISH["deviceUnreachable"] in recorded["texts"]["live"]
    assert page.notice() == ENGLISH["deviceUnreachable"]
    (row,) = page.rows()
    assert (row["state"], row["label"]) == ("queued", ENGLISH["queued"]), "a lost connection is no failure"
    assert recorded["requests"] == {"later.bin": 1}, "nothing is sent while the device is away"
    # The notice is readable in both colour schemes and fits a 360 px phone.
    for dark in (False, True):
        page.driver.execute_cdp_cmd(
            "Emulation.setEmulatedMedia",
            {"features": [{"name": "prefers-color-scheme", "value": "dark" if dark else "light"}]},
        )
        page.wait(lambda d: page.js(NO_TRANSITIONS), 5, "colour transitions to end")
        ratio = page.js(CONTRAST_HELPERS + "return ratio(css('#notice', 'color'),"
                        "over(css('#notice', 'backgroundColor'), css('html', 'backgroundColor')));")
        assert ratio >= 4.5, f"notice contrast {ratio:.2f} in {'dark' if dark else 'light'} mode"
    page.driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": 360, "height": 800, "deviceScaleFactor": 1, "mobile": True},
    )
    assert page.js("return document.documentElement.scrollWidth") <= 360

    host.send("resume")
    host.wait_for("resumed", timeout=30)
    page.wait_settled(1, timeout=30)
    assert page.rows()[0]["state"] == "uploaded"
    assert page.notice() == ""
    assert page.recorded()["requests"] == {"later.bin": 2}
    host.wait_count("uploadFinished", 1, timeout=15)
    assert_same_files({"later.bin": later}, host.finish())


def test_every_string_translated_with_title_language_and_accent(start_host, page, tmp_path):
    """A complete Spanish table through config.json alone: each of the 22 keys is seen where it
    belongs with its placeholders filled, no English text is left anywhere, and lang, title and
    accent are applied. loadError (shown when config.json can't be read) comes from the strings the
    browser kept from the last config.json at this address."""
    strings_file = tmp_path / "strings.json"
    strings_file.write_text(json.dumps(SPANISH), encoding="utf-8")
    spanish = ["--strings", str(strings_file), "--language", "es"]
    host = start_host(*spanish, "--title", "Mi App", "--accent", "#FF8800", "--allow", "txt,bin,mp3",
                      "--max-file-size", "3000000", "--max-concurrent", "1")
    seen = {}  # key → where it was seen
    shown = []  # every text the page showed, to look for English in

    page.record()
    page.open(host.url)
    assert page.js("return document.documentElement.lang") == "es"
    assert page.driver.title == "Subir archivos · Mi App"
    assert page.text("brand") == "Mi App"
    for key, element in [("title", "heading"), ("dropTitle", "drop-title"), ("dropHint", "drop-hint"),
                         ("chooseFiles", "choose-files"), ("chooseFolder", "choose-folder"),
                         ("summaryEmpty", "summary")]:
        assert page.text(element) == SPANISH[key], key
        seen[key] = element
    assert page.js("return document.querySelector('.subtitle').textContent") == SPANISH["subtitle"]
    seen["subtitle"] = ".subtitle"
    shown.append(page.js("return document.body.innerText"))

    # The accent colours the main button and the progress bars; text on it stays readable.
    # (The button eases into the new colour over 140 ms, so wait for the end of the transition.)
    page.wait(lambda d: page.js(
        "return getComputedStyle(document.getElementById('choose-files')).backgroundColor"
    ) == "rgb(255, 136, 0)", 5, "the accent colour on the main button")
    assert page.js(
        "return getComputedStyle(document.getElementById('choose-files')).color"
    ) == "rgb(15, 18, 32)"

    src = tmp_path / "src"
    parts = [write_file(src / f"parte {i}.bin", 1_000_000 + i) for i in (1, 2, 3)]
    hola = write_file(src / "hola.txt", text="hola")
    notas = write_file(src / "notas.txt", text="notas")
    grande = write_file(src / "grande.bin", 3_000_001)
    cancion = disguised_executable(src / "cancion.mp3")
    foto = write_file(src / "foto.png", 10)
    page.choose_files([*parts, hola, notas, grande, cancion, foto])
    page.wait_settled(7)
    # A folder called like a file already sent: 409.
    page.choose_folder(write_file(tmp_path / "otra" / "notas.txt" / "dentro.txt", text="x").parent)
    page.wait_settled(8)
    rows = {r["path"]: r for r in page.rows()}
    for path in ("parte 1.bin", "parte 2.bin", "parte 3.bin", "hola.txt", "notas.txt"):
        assert rows[path]["label"] == SPANISH["uploaded"], rows[path]
    for path, key in [("grande.bin", "tooLarge"), ("cancion.mp3", "unsupported"),
                      ("notas.txt/dentro.txt", "pathConflict")]:
        assert (rows[path]["label"], rows[path]["reason"]) == (SPANISH["failed"], SPANISH[key]), rows[path]
        seen[key] = path
    seen["uploaded"] = seen["failed"] = "rows"
    assert page.text("summary") == summary(5, 8, SPANISH)
    seen["summary"] = "summary"
    assert page.text("skipped") == SPANISH["skipped"].replace("{count}", "1")
    seen["skipped"] = "skipped"
    assert page.visible("retry") and page.text("retry") == SPANISH["retry"]
    seen["retry"] = "retry"
    assert page.visible("done") and page.text("done") == SPANISH["doneHint"]
    seen["doneHint"] = "done"
    # One upload at a time, so the others were seen waiting.
    labels = page.recorded()["texts"]["state"]
    assert SPANISH["queued"] in labels, labels
    assert any(label.startswith(SPANISH["uploading"] + " · ") for label in labels), labels
    seen["queued"] = seen["uploading"] = "state labels"
    page.screenshot("page-custom-strings.png", 1000)
    shown.append(page.js("return document.body.innerText"))

    # The device goes away while a file waits.
    host.send("suspend")
    host.wait_for("suspended", timeout=30)
    page.choose_files([write_file(tmp_path / "luego.txt", text="luego")])
    page.wait(lambda d: page.notice() == SPANISH["deviceUnreachable"], 20, "deviceUnreachable")
    notices = page.recorded()["texts"]["notice"]
    assert notices[:2] == [SPANISH["waitingForDevice"], SPANISH["deviceUnreachable"]], notices
    seen["waitingForDevice"] = seen["deviceUnreachable"] = "notice"
    shown.append(page.js("return document.body.innerText"))
    host.send("resume")
    host.wait_for("resumed", timeout=30)
    page.wait_settled(9, timeout=60)
    assert page.text("summary") == summary(6, 9, SPANISH)
    recorded = page.recorded()["texts"]
    shown.extend(text for texts in recorded.values() for text in texts)

    # Reloaded while config.json can't be read: the kept strings and language are used.
    page.driver.execute_cdp_cmd("Network.enable", {})
    page.driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*config.json*"]})
    page.driver.get(host.url)
    page.wait(lambda d: page.notice() == SPANISH["loadError"], 10, "the Spanish load error")
    seen["loadError"] = "notice after a reload"
    assert page.js("return document.documentElement.lang") == "es"
    assert page.text("heading") == SPANISH["title"]
    shown.append(page.js("return document.body.innerText"))
    page.driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
    page.wait(lambda d: page.js("return document.documentElement.dataset.ready === '1'"), 15,
              "config.json once it can be read")
    shown.extend(text for texts in page.recorded()["texts"].values() for text in texts)

    # A second device with no space left.
    full = start_host(*spanish, "--reserved-free-space", str(10**15))
    page.open(full.url)
    page.choose_files([hola])
    page.wait_settled(1)
    assert page.rows()[0]["reason"] == SPANISH["notEnoughSpace"]
    seen["notEnoughSpace"] = "reason"
    shown.append(page.js("return document.body.innerText"))
    shown.extend(text for texts in page.recorded()["texts"].values() for text in texts)

    # The hints of issue 17 need conditions of their own: test_engines.py shows each, translated.
    # alsoAt shows only once an mDNS name is published: test_name.py shows it (in English).
    elsewhere = {"folderUnsupported", "keepScreenOn", "iosOriginals", "unreadable", "alsoAt"}
    assert sorted(seen) == sorted(set(ENGLISH) - elsewhere), f"keys never seen: {sorted(set(ENGLISH) - set(seen) - elsewhere)}"
    everything = "\n".join(shown)
    assert "{" not in everything, "a placeholder was left unfilled"
    for key, english in ENGLISH.items():
        fragment = max(re.split(r"\{\w+\}", english), key=len).strip()
        assert fragment not in everything, f"English text of {key!r} shown: {fragment!r}"
    full.send("cancel")
    full.wait_for("cancelled", timeout=15)
    host.wait_count("uploadFinished", 6, timeout=15)


def test_html_in_a_file_name_is_shown_as_text(start_host, engine_page, tmp_path):
    page = engine_page
    host = start_host()
    name = "<img src=x onerror=alert(1)><b>bold & 'quoted'.txt"
    evil = write_file(tmp_path / name, text="not markup")
    page.open(host.url)
    page.choose_files([evil])
    page.wait_settled(1)
    assert page.rows()[0]["name"] == name
    assert page.js("return document.querySelectorAll('#list img, #list b').length") == 0
    host.wait_count("uploadFinished", 1, timeout=15)
    assert_same_files({name: evil}, host.finish())


def test_keyboard_labels_and_live_region(start_host, page, tmp_path):
    """Tab reaches both buttons and Enter/Space opens the matching picker; every control, the drop
    zone and each progress bar has an accessible name (as Chromium computes it); the live region
    announces the end."""
    host = start_host()
    page.open(host.url)
    # The pickers can't open headless: record which input the buttons ask to open instead.
    page.js(
        "window.__opened = [];"
        "for (const id of ['file-input', 'folder-input'])"
        "  document.getElementById(id).click = () => window.__opened.push(id);"
    )
    focused = []
    for key in (Keys.ENTER, Keys.SPACE):
        ActionChains(page.driver).send_keys(Keys.TAB).perform()
        focused.append(page.js("return document.activeElement.id"))
        ActionChains(page.driver).send_keys(key).perform()
    assert focused == ["choose-files", "choose-folder"]
    assert page.js("return window.__opened") == ["file-input", "folder-input"]

    def element(css):
        return page.driver.find_element(By.CSS_SELECTOR, css)

    assert element("#choose-files").accessible_name == ENGLISH["chooseFiles"]
    assert element("#choose-folder").accessible_name == ENGLISH["chooseFolder"]
    assert element("#retry").get_attribute("type") == "button"
    assert element("#drop").accessible_name == ENGLISH["dropTitle"]
    assert element("#notice").get_attribute("role") == "status"  # hidden until needed
    assert page.js("return [...document.querySelectorAll('input[type=file]')].every(i => i.tabIndex === -1)")
    assert page.js("return document.getElementById('live').getAttribute('aria-live')") == "polite"
    f = write_file(tmp_path / "note.txt", text="n")
    page.choose_files([f])
    page.wait_settled(1)
    page.wait(lambda d: ENGLISH["doneHint"] in page.text("live"), 5, "the live region to announce the end")
    assert summary(1, 1) in page.text("live")
    overall = element("#overall")
    assert (overall.aria_role, overall.accessible_name) == ("progressbar", summary(1, 1))
    assert overall.get_attribute("aria-valuenow") == "100"
    # A row's own bar is shown only while it uploads (the state label says the rest); its role
    # and name are set from the start.
    bar = element("#list .item .bar")
    assert (bar.get_attribute("role"), bar.get_attribute("aria-label")) == ("progressbar", "note.txt")
    host.wait_count("uploadFinished", 1, timeout=15)


def test_strict_csp_without_inline_code_or_outside_requests(start_host, page, tmp_path):
    """The page is served with the strict policy and runs under it: no inline script or style in
    the markup, nothing loaded from anywhere but the page's own address, and the violation watcher
    every test relies on does see what the policy refuses."""
    host = start_host()
    page.open(host.url)
    header = page.js("return fetch('/', {cache: 'no-store'}).then(r => r.headers.get('content-security-policy'))")
    policy = {d.split()[0]: d.split()[1:] for d in header.split(";") if d.strip()}
    for directive in ("default-src", "script-src", "style-src", "connect-src"):
        assert policy[directive] == ["'self'"], (directive, header)
    assert "unsafe" not in header
    html = (PAGE_DIR / "index.html").read_text(encoding="utf-8")
    assert not re.search(r"<script(?![^>]*\bsrc=)", html), "inline <script>"
    assert "<style" not in html and not re.search(r"\sstyle\s*=", html), "inline style"
    assert not re.search(r"\son[a-z]+\s*=", html, re.I), "inline event handler"
    for name in ("index.html", "app.js", "style.css"):
        text = (PAGE_DIR / name).read_text(encoding="utf-8")
        assert not re.search(r"https?://|//[a-z0-9.-]+\.[a-z]{2,}/", text, re.I), f"outside address in {name}"
    assert not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|eval\(|new Function",
                         (PAGE_DIR / "app.js").read_text(encoding="utf-8"))
    f = write_file(tmp_path / "one.txt", text="1")
    page.choose_files([f])
    page.wait_settled(1)
    resources = page.js("return performance.getEntriesByType('resource').map(e => e.name)")
    assert resources and all(name.startswith(host.url) for name in resources), resources

    # The watcher is not blind: inline style and script are refused, seen and logged.
    page.js(
        "const style = document.createElement('style'); style.textContent = 'body { color: red }';"
        "const script = document.createElement('script'); script.textContent = 'window.__ran = 1';"
        "document.head.append(style, script);"
    )
    page.wait(lambda d: len(page.js("return window.__cspViolations")) >= 2, 5, "two violations")
    violations = page.js("return window.__cspViolations")
    assert any(v.startswith("style-src") for v in violations), violations
    assert any(v.startswith("script-src") for v in violations), violations
    assert page.js("return window.__ran === undefined")
    logged = page.driver.get_log("browser")  # read (and so cleared) here: they were on purpose
    assert any("Content Security Policy" in entry["message"] for entry in logged), logged
    page.js("window.__cspViolations.length = 0")
    host.wait_count("uploadFinished", 1, timeout=15)


# True once no CSS transition runs (buttons ease into a colour scheme's colours over 140 ms).
NO_TRANSITIONS = "return document.getAnimations().every(a => !(a instanceof CSSTransition))"

CONTRAST_HELPERS = """
function rgba(text) {
  const m = text.match(/[\\d.]+/g).map(Number);
  const c = text.startsWith('color(') ? m.slice(0, 3).map(v => v * 255) : m.slice(0, 3);
  return [...c, m.length > 3 ? m[3] : 1];
}
// Translucent backgrounds are composited over the card they sit on.
function over(top, under) {
  const [r, g, b, a] = rgba(top), u = rgba(under);
  return `rgb(${r * a + u[0] * (1 - a)}, ${g * a + u[1] * (1 - a)}, ${b * a + u[2] * (1 - a)})`;
}
const rgb = text => rgba(text).slice(0, 3);
function lum(c) {
  const [r, g, b] = c.map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}
function ratio(fg, bg) { const a = lum(rgb(fg)), b = lum(rgb(bg)); return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05); }
const css = (sel, prop) => getComputedStyle(document.querySelector(sel))[prop];
"""

CONTRAST = CONTRAST_HELPERS + """
const page = css('html', 'backgroundColor'), card = css('#panel', 'backgroundColor');
return {
  heading: ratio(css('h1', 'color'), page),
  subtitle: ratio(css('.subtitle', 'color'), page),
  primary: ratio(css('#choose-files', 'color'), css('#choose-files', 'backgroundColor')),
  summary: ratio(css('#summary', 'color'), card),
  uploaded: ratio(css('.item[data-state=uploaded] .item-state', 'color'), card),
  failed: ratio(css('.item[data-state=failed] .item-reason', 'color'), card),
  folder: ratio(css('.item-folder', 'color'), card),
  size: ratio(css('.item-size', 'color'), card),
  skipped: ratio(css('#skipped', 'color'), over(css('#skipped', 'backgroundColor'), card)),
  reasonOnTint: ratio(css('.item[data-state=failed] .item-state', 'color'), card),
  secondary: ratio(css('#choose-folder', 'color'), css('#choose-folder', 'backgroundColor')),
  retry: ratio(css('#retry', 'color'), css('#retry', 'backgroundColor')),
  brand: ratio(css('#brand', 'color'), css('#brand', 'backgroundColor')),
  dropTitle: ratio(css('.drop-title', 'color'), css('#drop', 'backgroundColor')),
  dropHint: ratio(css('.drop-hint', 'color'), css('#drop', 'backgroundColor')),
  doneHint: ratio(css('#done', 'color'), card),
};
"""


@pytest.mark.parametrize("accent", ["#FFEE00", "gold", "rgb(20 24 40)", "#2563eb"])
def test_any_accent_keeps_the_button_text_and_focus_ring_readable(start_host, page, accent):
    """Whatever accent the host picks (a pale yellow, a CSS colour name, a near-black, the
    default blue), the main button's text keeps 4.5:1 on it and the keyboard focus ring keeps 3:1
    against the card, in light and in dark mode."""
    host = start_host("--accent", accent)
    page.open(host.url)
    ActionChains(page.driver).send_keys(Keys.TAB).perform()
    assert page.js("return document.activeElement.id") == "choose-files"
    for dark in (False, True):
        page.driver.execute_cdp_cmd(
            "Emulation.setEmulatedMedia",
            {"features": [{"name": "prefers-color-scheme", "value": "dark" if dark else "light"}]},
        )
        page.wait(lambda d: page.js(NO_TRANSITIONS), 5, "colour transitions to end")
        mode = "dark" if dark else "light"
        text = page.js(CONTRAST_HELPERS + "return ratio(css('#choose-files', 'color'),"
                       "css('#choose-files', 'backgroundColor'));")
        assert text >= 4.5, f"{accent}, {mode}: button text {text:.2f}:1"
        assert page.js(CONTRAST_HELPERS + "return css('#choose-files', 'outlineStyle');") == "solid"
        ring = page.js(CONTRAST_HELPERS + "return ratio(css('#choose-files', 'outlineColor'),"
                       "over(css('#drop', 'backgroundColor'), css('#panel', 'backgroundColor')));")
        assert ring >= 3, f"{accent}, {mode}: focus ring {ring:.2f}:1 against the drop zone"


def test_contrast_light_and_dark_and_screenshots(start_host, page, tmp_path):
    """The finished page in light and dark mode, at 1000 and 360 px; text contrast at least 4.5:1."""
    host = start_host("--allow", "mp3,m4b,jpg,txt", "--max-file-size", "4000000", "--title", "BookPlayer")
    book = tmp_path / "The Long Way Home"
    for name, size in [("01 Opening.mp3", 2_400_000), ("02 The River.mp3", 3_100_000),
                       ("03 A very long chapter title that will not fit on a phone.mp3", 1_800_000),
                       ("cover.jpg", 350_000), ("notes.txt", None), ("Thumbs.db", 4000)]:
        if size is None:
            write_file(book / name, text="Chapter notes")
        else:
            write_file(book / name, size)
    write_file(book / "Extras" / "Bonus interview.m4b", 5_200_000)  # over the limit
    page.open(host.url)
    page.choose_folder(book)
    page.wait_settled(6)
    for dark in (False, True):
        page.driver.execute_cdp_cmd(
            "Emulation.setEmulatedMedia",
            {"features": [{"name": "prefers-color-scheme", "value": "dark" if dark else "light"}]},
        )
        # Buttons ease into the new scheme's colours: measure once the transitions are over.
        page.wait(lambda d: page.js(NO_TRANSITIONS), 5, "colour transitions to end")
        ratios = page.js(CONTRAST)
        low = {k: round(v, 2) for k, v in ratios.items() if v < 4.5}
        assert not low, f"contrast below 4.5:1 in {'dark' if dark else 'light'} mode: {low}"
    page.screenshot("page-finished.png", 1000)
    page.screenshot("page-finished-360.png", 360, height=800)
    page.screenshot("page-finished-dark.png", 1000, dark=True)
    # At 360 px nothing scrolls sideways.
    page.driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": 360, "height": 800, "deviceScaleFactor": 1, "mobile": True},
    )
    assert page.js("return document.documentElement.scrollWidth") <= 360
    host.wait_count("uploadFinished", 5, timeout=15)


def test_config_unreachable_then_recovers(start_host, page, tmp_path):
    """config.json can't be fetched: loadError is shown, and the page recovers on its own."""
    host = start_host()
    page.driver.execute_cdp_cmd("Network.enable", {})
    page.driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*config.json*"]})
    page.driver.get(host.url)
    page.wait(lambda d: page.notice() == ENGLISH["loadError"], 10, "the load error")
    assert page.visible("notice") and page.visible("heading"), "a failed config.json shows the page"
    assert page.js("return document.getElementById('choose-files').disabled")
    page.driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
    page.wait(lambda d: page.js("return document.documentElement.dataset.ready === '1'"), 15,
              "the page to load config.json once it is reachable")
    assert page.notice() == ""
    assert not page.js("return document.getElementById('choose-files').disabled")


def test_page_shows_even_if_its_script_never_runs(start_host, page):
    """The page is hidden until config.json is read, so it never flashes English before a
    translation; if app.js never runs at all, the stylesheet shows it anyway after a second."""
    host = start_host()
    page.driver.execute_cdp_cmd("Network.enable", {})
    page.driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*app.js*"]})
    page.driver.get(host.url)
    page.wait(lambda d: page.visible("heading"), 5, "the heading to show without app.js")
    assert page.js("return document.documentElement.dataset.shown === undefined"), "no script ran"
    assert page.text("heading") == ENGLISH["title"]
    page.driver.get_log("browser")  # the blocked app.js is logged as an error: expected here


def browser_rss(root):
    """Resident memory, in bytes, of every process under `root` (chromedriver, WebKitWebDriver or
    Firefox, started by this test run)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    parent = int(handle.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    total, pending = 0, [root]
    while pending:
        pid = pending.pop()
        pending.extend(children.get(pid, []))
        try:
            with open(f"/proc/{pid}/status") as handle:
                for line in handle:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def test_large_file_streams_without_memory_growth(start_host, engine_page, tmp_path):
    """A 3 GiB file in Chromium, 512 MiB in Firefox and WebKit (to keep the run short): the memory of
    all the browser's processes stays flat while it uploads (send(file) streams it; a page that read
    the file into memory would grow by its size)."""
    page = engine_page
    size = 3 << 30 if page.name == "chromium" else 512 << 20
    host = start_host()
    big = tmp_path / "big.bin"
    with open(big, "wb") as handle:  # sparse: quick to make, read back as zeros
        handle.truncate(size)
    page.open(host.url)
    root = page.engine.root_pid()
    before = browser_rss(root)
    page.choose_files([big])
    peak = before
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        peak = max(peak, browser_rss(root))
        if page.rows() and page.rows()[0]["state"] in ("uploaded", "failed"):
            break
        time.sleep(0.2)
    page.wait_settled(1, timeout=5)
    assert page.rows()[0]["state"] == "uploaded"
    growth = peak - before
    print(f"{page.name}: browser RSS before {before >> 20} MiB, peak {peak >> 20} MiB")
    assert growth < 256 << 20, f"the browser grew by {growth >> 20} MiB for a {size >> 20} MiB upload"
    host.wait_count("uploadFinished", 1, timeout=30)
    assert_same_files({"big.bin": big}, host.finish())

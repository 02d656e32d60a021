"""The bundled upload page against the real server, in headless Chromium."""

import json
import os
import time

from conftest import ENGLISH, assert_same_files, write_file

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
    "deviceUnreachable": "No se puede conectar con el dispositivo.",
    "notEnoughSpace": "No hay espacio suficiente en el dispositivo",
    "tooLarge": "Demasiado grande",
    "unsupported": "Tipo de archivo no admitido",
    "pathConflict": "Otro archivo o carpeta que enviaste tiene este nombre",
    "skipped": "Omitidos porque el tipo no se admite: {count}",
    "retry": "Reintentar los fallidos",
    "doneHint": "Cuando termines, confírmalo en tu dispositivo para importar los archivos.",
    "loadError": "No se puede conectar con el dispositivo.",
}


def summary(done, total, strings=ENGLISH):
    return strings["summary"].replace("{done}", str(done)).replace("{total}", str(total))


def test_choose_several_files(start_host, page, tmp_path):
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
    host.wait_count("uploadFinished", 4, timeout=15)
    assert_same_files(files, host.finish())


def test_choose_folder_keeps_structure(start_host, page, tmp_path):
    host = start_host()
    tree = tmp_path / "Book"
    sent = {
        "Book/01 Intro.bin": write_file(tree / "01 Intro.bin", 200_000),
        "Book/Part 1/02.bin": write_file(tree / "Part 1" / "02.bin", 1_500_000),
        "Book/Part 1/deeper/03.txt": write_file(tree / "Part 1" / "deeper" / "03.txt", text="three"),
    }
    write_file(tree / ".DS_Store", 64)  # hidden files are left out silently
    write_file(tree / ".git" / "config", text="[core]")
    page.open(host.url)
    page.choose_folder(tree)
    page.wait_settled(3)
    assert page.text("summary") == summary(3, 3)
    assert not page.visible("skipped"), "hidden files must not count as skipped"
    host.wait_count("uploadFinished", 3, timeout=15)
    assert_same_files(sent, host.finish())


def test_drag_and_drop_files_and_folder(start_host, page, tmp_path):
    """A trusted CDP drag and drop: the page walks webkitGetAsEntry() folders itself."""
    host = start_host()
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
    page.open(host.url)
    page.drop([loose, tree])
    page.wait_settled(len(sent))
    assert sorted(r["path"] for r in page.rows()) == sorted(sent)
    assert page.text("summary") == summary(5, 5)
    host.wait_count("uploadFinished", 5, timeout=15)
    # The folder itself (listed by dataTransfer.files as a 4 KiB pseudo-file) was never uploaded.
    assert not host.of("uploadStarted", path="tree")
    assert_same_files(sent, host.finish())


def test_unsupported_types_are_skipped_with_count(start_host, page, tmp_path):
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


def test_disguised_executable_is_refused_while_it_streams(start_host, page, tmp_path):
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


def test_too_large_before_upload(start_host, page, tmp_path):
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


def test_too_large_refused_by_server_413(start_host, page, tmp_path):
    host = start_host("--max-file-size", "100000")
    page.driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": HIDE_LIMIT})
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
    host.wait_count("uploadFinished", 1, timeout=15)
    assert_same_files({"ok.bin": small}, host.finish())


COUNT_UPLOADS = """
window.uploadRequests = 0;
const realOpen = XMLHttpRequest.prototype.open;
XMLHttpRequest.prototype.open = function (method, url, ...rest) {
  if (String(url).startsWith('upload?')) window.uploadRequests += 1;
  return realOpen.call(this, method, url, ...rest);
};
"""


def test_not_enough_space_and_retry_failed(start_host, page, tmp_path):
    # Asking the server to keep a petabyte free makes every upload answer 507.
    host = start_host("--reserved-free-space", str(10**15))
    one = write_file(tmp_path / "one.txt", text="1")
    page.driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": COUNT_UPLOADS})
    page.open(host.url)
    page.choose_files([one])
    page.wait_settled(1)
    (row,) = page.rows()
    assert (row["state"], row["reason"]) == ("failed", ENGLISH["notEnoughSpace"])
    assert page.visible("retry") and page.text("retry") == ENGLISH["retry"]
    assert not page.visible("done")
    # A 507 comes back within milliseconds: count the upload requests the page sends instead.
    assert page.js("return window.uploadRequests") == 1
    page.driver.find_element("id", "retry").click()
    page.wait(lambda d: page.js("return window.uploadRequests") == 2, 10, "the retry to be sent")
    page.wait_settled(1)
    assert page.rows()[0]["reason"] == ENGLISH["notEnoughSpace"]
    host.send("cancel")
    host.wait_for("cancelled", timeout=15)


def test_path_conflict(start_host, page, tmp_path):
    host = start_host()
    first = write_file(tmp_path / "a" / "x", text="a file called x")
    folder = tmp_path / "b" / "x"
    write_file(folder / "y.txt", text="a file inside a folder called x")
    page.open(host.url)
    page.choose_files([first])
    page.wait_settled(1)
    page.choose_folder(folder)
    page.wait_settled(2)
    rows = {r["path"]: r for r in page.rows()}
    assert rows["x"]["state"] == "uploaded"
    assert rows["x/y.txt"]["state"] == "failed"
    assert rows["x/y.txt"]["reason"] == ENGLISH["pathConflict"]
    assert_same_files({"x": first}, host.finish())


def test_suspend_mid_queue_then_resume(start_host, page, tmp_path):
    """The host suspends its server while the queue runs; the page waits and finishes by itself."""
    host = start_host()
    src = tmp_path / "many"
    count = 48
    sent = {f"many/{i:02d}.bin": write_file(src / f"{i:02d}.bin", 3 * 1024 * 1024) for i in range(count)}
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
    host.wait_count("uploadFinished", count, timeout=30)
    assert_same_files(sent, host.finish())


def test_custom_strings_title_language_and_accent(start_host, page, tmp_path):
    strings_file = tmp_path / "strings.json"
    strings_file.write_text(json.dumps(SPANISH), encoding="utf-8")
    host = start_host("--strings", str(strings_file), "--language", "es", "--title", "Mi App",
                      "--accent", "#FF8800", "--allow", "txt", "--max-file-size", "1000")
    page.open(host.url)
    assert page.js("return document.documentElement.lang") == "es"
    assert page.driver.title == "Subir archivos · Mi App"
    assert page.text("heading") == SPANISH["title"]
    assert page.text("brand") == "Mi App"
    assert page.text("drop-title") == SPANISH["dropTitle"]
    assert page.text("drop-hint") == SPANISH["dropHint"]
    assert page.text("choose-files") == SPANISH["chooseFiles"]
    assert page.text("choose-folder") == SPANISH["chooseFolder"]
    assert page.text("summary") == SPANISH["summaryEmpty"]
    body = page.js("return document.body.innerText")
    assert SPANISH["subtitle"] in body
    for english in ("Upload files", "Choose files", "Drop files", "No files yet"):
        assert english not in body

    # The accent colours the main button and the progress bars; text on it stays readable.
    # (The button eases into the new colour over 140 ms, so wait for the end of the transition.)
    page.wait(lambda d: page.js(
        "return getComputedStyle(document.getElementById('choose-files')).backgroundColor"
    ) == "rgb(255, 136, 0)", 5, "the accent colour on the main button")
    assert page.js(
        "return getComputedStyle(document.getElementById('choose-files')).color"
    ) == "rgb(15, 18, 32)"

    ok = write_file(tmp_path / "ok.txt", text="hola")
    big = write_file(tmp_path / "big.txt", text="x" * 2000)
    other = write_file(tmp_path / "photo.png", 10)
    page.choose_files([ok, big, other])
    page.wait_settled(2)
    rows = {r["path"]: r for r in page.rows()}
    assert rows["ok.txt"]["label"] == SPANISH["uploaded"]
    assert rows["big.txt"]["label"] == SPANISH["failed"]
    assert rows["big.txt"]["reason"] == SPANISH["tooLarge"]
    assert page.text("summary") == summary(1, 2, SPANISH)
    assert page.text("skipped") == SPANISH["skipped"].replace("{count}", "1")
    assert page.text("done") == SPANISH["doneHint"]
    assert page.js(
        "return getComputedStyle(document.querySelector('#overall .fill')).backgroundColor"
    ) != "rgb(255, 136, 0)"  # a finished batch turns the bar green
    host.wait_count("uploadFinished", 1, timeout=15)


def test_html_in_a_file_name_is_shown_as_text(start_host, page, tmp_path):
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
    host = start_host()
    page.open(host.url)
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    focused = []
    for _ in range(2):
        ActionChains(page.driver).send_keys(Keys.TAB).perform()
        focused.append(page.js("return document.activeElement.id"))
    assert focused == ["choose-files", "choose-folder"]
    # Every control has an accessible name, and the file inputs stay out of the tab order.
    assert page.js(
        "return [...document.querySelectorAll('button')].every(b => b.textContent.trim() !== '')"
    )
    assert page.js("return [...document.querySelectorAll('input[type=file]')].every(i => i.tabIndex === -1)")
    assert page.js("return document.getElementById('live').getAttribute('aria-live')") == "polite"
    f = write_file(tmp_path / "note.txt", text="n")
    page.choose_files([f])
    page.wait_settled(1)
    page.wait(lambda d: ENGLISH["doneHint"] in page.text("live"), 5, "the live region to announce the end")
    assert summary(1, 1) in page.text("live")
    bar = page.js("return document.getElementById('overall').getAttribute('aria-valuenow')")
    assert bar == "100"


CONTRAST = """
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
};
"""


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
    assert page.js("return document.getElementById('choose-files').disabled")
    page.driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
    page.wait(lambda d: page.js("return document.documentElement.dataset.ready === '1'"), 15,
              "the page to load config.json once it is reachable")
    assert page.notice() == ""
    assert not page.js("return document.getElementById('choose-files').disabled")


def browser_rss(driver):
    """Resident memory, in bytes, of every process under the chromedriver this test started."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    parent = int(handle.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    total, pending = 0, list(children.get(driver.service.process.pid, []))
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


def test_large_file_streams_without_memory_growth(start_host, page, tmp_path):
    """A 1 GiB file: the browser's memory stays flat while it uploads (send(file) streams it)."""
    host = start_host()
    big = tmp_path / "big.bin"
    with open(big, "wb") as handle:  # sparse: quick to make, read back as zeros
        handle.truncate(1 << 30)
    page.open(host.url)
    before = browser_rss(page.driver)
    page.choose_files([big])
    peak = before
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        peak = max(peak, browser_rss(page.driver))
        if page.rows() and page.rows()[0]["state"] in ("uploaded", "failed"):
            break
        time.sleep(0.2)
    page.wait_settled(1, timeout=5)
    assert page.rows()[0]["state"] == "uploaded"
    growth = peak - before
    print(f"browser RSS before {before >> 20} MiB, peak {peak >> 20} MiB")
    assert growth < 256 << 20, f"the browser grew by {growth >> 20} MiB for a 1 GiB upload"
    host.wait_count("uploadFinished", 1, timeout=30)
    assert_same_files({"big.bin": big}, host.finish())

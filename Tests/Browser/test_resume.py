"""The page's part of resumable uploads (issue 15, README "Resumable uploads"): with config.json's
`resumable` (the test host's --resumable), an upload cut off by the network or by a reload goes on
from where the device stands (HEAD for the offset, then PATCH with the rest), instead of
starting again from byte 0."""

import os
import socket
import subprocess
import threading
import time

import pytest

from conftest import ENGLISH, Host, Paused, assert_same_files, sparse

SIZE = 48 << 20
BUFFER = 128 << 10


class CountingProxy:
    """A TCP relay on 127.0.0.1 in front of the test host that counts every byte it passed on to
    it, from the browser: an upper bound of what the server received. Blocking writes keep the
    browser's back-pressure (a paused host stops the relay reading), and a connection the browser
    drops is dropped towards the host too."""

    def __init__(self, host):
        self.target = ("127.0.0.1", int(host.url.rsplit(":", 1)[1].strip("/")))
        # Small buffers on both legs, so the relay holds about what a direct connection would
        # have in flight, not megabytes more (accepted sockets inherit the listener's).
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, BUFFER)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.listener.settimeout(0.5)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/"
        self.sent = 0
        self.lock = threading.Lock()
        self.closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return
            upstream = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            upstream.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, BUFFER)
            upstream.settimeout(30)
            upstream.connect(self.target)
            upstream.settimeout(None)
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, source, sink, counted):
        try:
            while True:
                data = source.recv(1 << 16)
                if not data:
                    break
                sink.sendall(data)
                if counted:
                    with self.lock:
                        self.sent += len(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                end.close()

    def close(self):
        self.closed.set()
        self.listener.close()


@pytest.fixture
def proxy_for():
    proxies = []

    def make(host):
        proxies.append(CountingProxy(host))
        return proxies[-1]

    yield make
    for proxy in proxies:
        proxy.close()


def cut_mid_body(page, spurts, paused):
    """Waits (polling quickly, at most 60 s) until a fifth of the file is sent, then ends the
    spurts at once, the host left paused or running."""
    deadline = time.monotonic() + 60
    while progress(page) < 20:
        assert time.monotonic() < deadline, f"{page.name}: a fifth of the file never sent"
        time.sleep(0.02)
    spurts.end(paused=paused)


def progress(page):
    return page.js("const row = document.querySelector('#list .item .bar');"
                   "return row ? Number(row.getAttribute('aria-valuenow')) : -1;")


class Spurts:
    """The host runs 5 ms of every 0.3 s (SIGSTOP/SIGCONT to its PID), so an upload over
    loopback moves slowly enough to be cut in the middle, in every engine."""

    def __init__(self, host):
        self.paused = Paused(host)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop.wait(0.3):
            self.paused.__exit__()
            time.sleep(0.005)
            if self.stop.is_set():
                return
            self.paused.__enter__()

    def __enter__(self):
        self.paused.__enter__()
        self.thread.start()
        return self

    def end(self, paused):
        """Stops the spurts, leaving the host paused or running."""
        self.stop.set()
        self.thread.join(timeout=10)
        (self.paused.__enter__ if paused else self.paused.__exit__)()

    def __exit__(self, *exc):
        self.end(paused=False)


def test_upload_cut_off_resumes_where_the_device_stands(start_host, engine_page, tmp_path, proxy_for):
    """Mid-upload the device stops answering for about 4 s (its process paused): the page gives
    the request up after the stall time, waits for the device, asks where the upload stands and
    sends only the rest. The file arrives whole, and the host got less than 1.1× its size."""
    page = engine_page
    host = start_host("--no-durability", "--resumable")
    proxy = proxy_for(host)
    page.open(proxy.url + "?bd-stall-ms=1500")
    big = sparse(tmp_path / "video.bin", SIZE)
    before = proxy.sent
    with Spurts(host) as spurts:
        page.choose_files([big])
        cut_mid_body(page, spurts, paused=True)
        page.wait(lambda d: page.notice() in (ENGLISH["waitingForDevice"], ENGLISH["deviceUnreachable"]),
                  20, "the page to notice the stall")
        shown = progress(page)
        time.sleep(2.5)
    page.wait_settled(1, timeout=60)
    assert page.rows()[0]["state"] == "uploaded"
    assert page.notice() == ""
    host.wait_count("uploadFinished", 1, timeout=30)
    read = proxy.sent - before
    resumed = host.of("uploadResumed", path="video.bin")
    paused = host.of("uploadPaused", path="video.bin")
    print(f"{page.name}: shown {shown}% at the cut; paused {paused}; resumed {resumed}; "
          f"read {read} bytes = {read / SIZE:.3f} × the file")
    assert resumed and resumed[-1]["offset"] > 0, (paused, resumed)
    assert read < 1.1 * SIZE, f"{read} bytes read for a {SIZE}-byte file"
    assert len(host.of("uploadStarted")) == 1
    assert page.js("return Object.keys(localStorage).filter(k => k.startsWith('browserdrop.upload.'))") == []
    assert_same_files({"video.bin": big}, host.finish())


def test_network_offline_then_back_resumes_by_itself(start_host, page, tmp_path, proxy_for):
    """Chromium only (DevTools): mid-body the network goes offline for 5 s
    (`Network.emulateNetworkConditions`), then comes back. Chromium lets a request already under
    way carry on when it goes offline, so the host is paused as well (SIGSTOP, as a device that
    dropped off the network): the stall gives the request up, and every check for the device
    (config.json, HEAD) fails while offline. Back online the page resumes by itself and the
    host got less than 1.1× the file's size."""
    host = start_host("--no-durability", "--resumable")
    proxy = proxy_for(host)
    driver = page.driver
    driver.execute_cdp_cmd("Network.enable", {})
    online = {"offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1}
    driver.execute_cdp_cmd("Network.emulateNetworkConditions", online)
    page.record(probe_scale=10)
    page.open(proxy.url + "?bd-stall-ms=1500")
    big = sparse(tmp_path / "video.bin", SIZE)
    before = proxy.sent
    with Spurts(host) as spurts:
        page.choose_files([big])
        cut_mid_body(page, spurts, paused=True)
        driver.execute_cdp_cmd("Network.emulateNetworkConditions", {**online, "offline": True})
        page.wait(lambda d: page.notice() in (ENGLISH["waitingForDevice"], ENGLISH["deviceUnreachable"]),
                  20, "the page to notice the cut")
        time.sleep(5)
    driver.execute_cdp_cmd("Network.emulateNetworkConditions", online)
    page.wait_settled(1, timeout=90)
    assert page.rows()[0]["state"] == "uploaded"
    host.wait_count("uploadFinished", 1, timeout=30)
    read = proxy.sent - before
    resumed = host.of("uploadResumed", path="video.bin")
    print(f"chromium offline: resumed {resumed}; read {read / SIZE:.3f} × the file")
    assert resumed and resumed[-1]["offset"] > 0, (host.of("uploadPaused"), resumed)
    assert read < 1.1 * SIZE, f"{read} bytes read for a {SIZE}-byte file"
    assert_same_files({"video.bin": big}, host.finish())


def test_reload_then_the_same_file_resumes(start_host, engine_page, tmp_path):
    """A reload mid-upload, then the same file picked again: the id kept in localStorage (path,
    size, lastModified) names it, HEAD says how much the device holds, and only the rest is sent."""
    page = engine_page
    host = start_host("--no-durability", "--resumable")
    page.open(host.url + "?bd-stall-ms=1500")
    big = sparse(tmp_path / "video.bin", SIZE)
    with Spurts(host) as spurts:
        page.choose_files([big])
        cut_mid_body(page, spurts, paused=False)
        # While uploads run the page asks before it is left; the person says "Leave" (the
        # page's beforeunload handler is made a no-op, so no engine shows or blocks a question).
        page.js("BeforeUnloadEvent.prototype.preventDefault = function () {};"
                "Object.defineProperty(BeforeUnloadEvent.prototype, 'returnValue',"
                "  { configurable: true, get() { return ''; }, set(value) {} });"
                "window.location.reload()")
    # Polled while the reload runs: between the two documents Firefox briefly has none
    # (documentElement null), which is "not yet", not an error (seen once in a CI run).
    page.wait(lambda d: page.js("return document.documentElement?.dataset.ready === '1' && "
                                "document.querySelectorAll('#list .item').length === 0"),
              20, "the page loaded again")
    host.wait_for("uploadPaused", timeout=20, path="video.bin")
    page.choose_files([big])
    page.wait_settled(1, timeout=60)
    assert page.rows()[0]["state"] == "uploaded"
    host.wait_count("uploadFinished", 1, timeout=30)
    resumed = host.of("uploadResumed", path="video.bin")
    assert resumed and resumed[-1]["offset"] > 0, (host.of("uploadPaused"), resumed)
    assert_same_files({"video.bin": big}, host.finish())


def test_a_file_gone_from_the_disk_fails_with_its_own_message(start_host, engine_page, tmp_path):
    """Mid-upload the connection is cut and the file is deleted: before sending more the page reads
    one byte at the offset, which fails, so the row fails with `unreadable` (not "Waiting for the
    device…" forever), and its id is forgotten."""
    page = engine_page
    host = start_host("--no-durability", "--resumable")
    page.open(host.url + "?bd-stall-ms=1500")
    big = sparse(tmp_path / "gone.bin", SIZE)
    with Spurts(host) as spurts:
        page.choose_files([big])
        cut_mid_body(page, spurts, paused=True)
        page.wait(lambda d: page.notice() in (ENGLISH["waitingForDevice"], ENGLISH["deviceUnreachable"]),
                  20, "the page to notice the stall")
        big.unlink()
    page.wait_settled(1, timeout=30)
    row = page.rows()[0]
    assert row["state"] == "failed" and row["reason"] == ENGLISH["unreadable"], row
    assert page.js("return Object.keys(localStorage).filter(k => k.startsWith('browserdrop.upload.'))") == []
    assert not host.of("uploadFinished")


def stored_ids(page):
    return page.js("return Object.keys(localStorage).filter(k => k.startsWith('browserdrop.upload.'))")


def test_a_resume_refused_for_space_keeps_its_place(engine_page, tmp_path):
    """In every engine: mid-upload of a 160 MiB file the device stalls, and meanwhile its volume
    fills (a 256 MiB tmpfs of the test's own, filled to 64 MiB free: room for what the sockets
    still hold for the host, up to 32 MiB of receive buffer here, which Firefox fills more than
    Chromium, and far less than the rest of the file, at least 120 MiB): the resume's HEAD says
    the rest does not fit
    (`Upload-Space: insufficient`), and the row fails with "not enough space" without sending
    the rest. The device still keeps what arrived, so the page keeps the upload's id: once there
    is room again, Retry failed asks where the upload stands and sends only the rest, as the same
    upload (before, the id was forgotten and the retry sent the whole file again).

    The HEAD is what lets Firefox and WebKit say why: they read an answer only once they have
    sent the whole body, and the server reads and drops at most 8 MiB (2 s) of a body it refused
    before closing, so a PATCH refused with 507 reaches them as a dropped connection."""
    page = engine_page
    if os.geteuid() != 0:
        pytest.fail("this test mounts a tmpfs: run it as root (scripts/test.sh does)")
    volume = tmp_path / "small"
    volume.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", str(volume)], check=True)
    host = None
    try:
        (volume / "staging").mkdir()
        host = Host(volume / "staging", ["--no-durability", "--resumable", "--reserved-free-space", "0"],
                    tmp_path / "host.log")
        page.open(host.url + "?bd-stall-ms=1500")
        big = sparse(tmp_path / "video.bin", 160 << 20)
        filler = volume / "filler"
        with Spurts(host) as spurts:
            page.choose_files([big])
            cut_mid_body(page, spurts, paused=True)
            page.wait(lambda d: page.notice() in (ENGLISH["waitingForDevice"], ENGLISH["deviceUnreachable"]),
                      20, "the page to notice the stall")
            # The host is stopped: what it wrote is on the volume; leave 64 MiB (see above).
            free = os.statvfs(volume)
            with open(filler, "wb") as out:
                out.write(b"\0" * (free.f_bavail * free.f_frsize - (64 << 20)))
        host.wait_for("uploadPaused", timeout=20, path="video.bin")
        page.wait_settled(1, timeout=60)
        row = page.rows()[0]
        assert (row["state"], row["reason"]) == ("failed", ENGLISH["notEnoughSpace"]), row
        assert page.visible("retry")
        assert len(stored_ids(page)) == 1, "the id is kept: the device still holds the bytes"
        kept = host.of("uploadPaused", path="video.bin")[-1]["keptBytes"]
        assert kept > 0
        assert not host.of("uploadResumed"), "HEAD said the rest does not fit: no PATCH admitted"
        filler.unlink()
        # The retry's HEAD measures the free space afresh; so does the PATCH when its cached
        # figure (up to 250 ms old, UploadAdmission) would refuse it.
        page.click("retry")
        # Not wait_settled: right after the click the row may still read "failed".
        page.wait(lambda d: page.rows()[0]["state"] == "uploaded", 60, "the retried upload to finish")
        host.wait_count("uploadFinished", 1, timeout=30)
        assert len(host.of("uploadStarted")) == 1, "the same upload, not a new one"
        resumed = host.of("uploadResumed", path="video.bin")
        assert resumed and resumed[-1]["offset"] == kept, (kept, resumed)
        assert stored_ids(page) == []
        assert_same_files({"video.bin": big}, host.finish())
    finally:
        if host:
            host.stop()
        subprocess.run(["umount", str(volume)], check=False)


def test_a_large_upload_refused_before_its_body_says_why(start_host, engine_page, tmp_path):
    """In every engine: a 64 MiB file the device refuses at once for space (it must keep a
    petabyte free) fails with "not enough space" after one request, and Retry failed sends it
    once more. Chromium reads the 507 itself. Firefox and WebKit read an answer only after
    sending the whole body, and the device drops at most 8 MiB (2 s) of a body it refused, so
    to them the 507 is a dropped connection: the page waits for the device, asks the upload's
    HEAD, and learns the reason there (`Upload-Refusal: insufficient_storage`; before, it sent
    the file again and again and gave up after 8 drops without a reason)."""
    page = engine_page
    host = start_host("--resumable", "--reserved-free-space", str(10**15))
    big = sparse(tmp_path / "video.bin", 64 << 20)
    page.record()
    page.open(host.url)
    page.choose_files([big])
    page.wait(lambda d: page.rows()[0]["state"] == "failed", 60, "the refusal to show")
    row = page.rows()[0]
    assert row["reason"] == ENGLISH["notEnoughSpace"], row
    assert page.recorded()["requests"] == {"video.bin": 1}
    page.wait(lambda d: page.notice() == "", 10, "the device to count as reachable")
    assert page.visible("retry")
    page.click("retry")
    page.wait(lambda d: page.recorded()["requests"] == {"video.bin": 2}, 30, "the retry to be sent")
    page.wait(lambda d: page.rows()[0]["state"] == "failed", 60, "the retry's refusal to show")
    # Once seen failing here without a reason under CI load (not reproduced alone): say why.
    row, recorded = page.rows()[0], page.recorded()
    assert row["reason"] == ENGLISH["notEnoughSpace"], (row, recorded, host.events[-8:])
    assert recorded["requests"] == {"video.bin": 2}
    assert not host.of("uploadStarted")

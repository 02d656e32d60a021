"""The real kiosk (`browserdrop --kiosk`, the built command) and the page, across crashes (issue 15,
README "Resumable uploads"): a `kill -9` in the middle of a large upload from the page, and a kiosk
that dies after storing a file but before its 201 reached the page. After a restart on the same
staging folder and port the page carries on by itself, and the batch is forwarded exactly once.

Environment:
  BROWSERDROP_KIOSK_RESUME_SIZE  the large file's size in bytes (default 1 GiB)
"""

import hashlib
import json
import os
import pathlib
import shutil
import signal
import subprocess
import threading
import time

import pytest

from conftest import COMMAND_BINARY, sha256, write_file

SIZE = int(os.environ.get("BROWSERDROP_KIOSK_RESUME_SIZE", str(1 << 30)))
# The large file repeats one random block whose length is no power of two, so a byte sent to the
# wrong offset on resume changes the file's hash.
BLOCK = 1_000_003
# The page's checks for the device come this many times sooner (conftest's RECORDER), so it
# notices the restarted kiosk within a fraction of a second.
PROBE_SCALE = 20


class Kiosk:
    """`browserdrop --kiosk --json` on 127.0.0.1, its event lines read on a thread. Killed or
    stopped by its PID only."""

    def __init__(self, tmp_path, port=0, environment=None, name="kiosk"):
        if not os.access(COMMAND_BINARY, os.X_OK):
            pytest.fail(f"browserdrop not found at {COMMAND_BINARY}: build it or set BROWSERDROP_BINARY")
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8", **(environment or {})}
        self.log_path = tmp_path / f"{name}.log"
        self._log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [COMMAND_BINARY, "--kiosk", "--json", "--bind", "127.0.0.1", "--port", str(port),
             "--quiet-period", "0.5", "--staging", str(tmp_path / "staging"),
             "--to", str(tmp_path / "dest"), "--batch-folder", "batch {n}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._log, text=True, env=env,
        )
        self.events = []
        self._changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        listening = self.wait_for("listening")
        self.url = listening["addresses"][0]["url"]
        self.port = int(self.url.rsplit(":", 1)[1].strip("/"))

    def _read(self):
        for line in self.process.stdout:
            if line.strip():
                with self._changed:
                    self.events.append(json.loads(line))
                    self._changed.notify_all()
        with self._changed:
            self.events.append({"event": "exited"})
            self._changed.notify_all()

    def of(self, name):
        with self._changed:
            return [e for e in self.events if e.get("event") == name]

    def wait_for(self, name, timeout=30):
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = [e for e in self.events if e.get("event") == name]
                if found:
                    return found[0]
                if any(e.get("event") == "exited" for e in self.events):
                    raise AssertionError(f"the kiosk exited before {name}: {self.events[-20:]}; "
                                         f"{self.log_path.read_text(errors='replace')[-2000:]}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {name} within {timeout} s: {self.events[-20:]}")
                self._changed.wait(min(left, 0.5))

    def wait_exit(self, timeout=30):
        return self.process.wait(timeout=timeout)

    def kill(self):
        """kill -9 of this kiosk's PID."""
        os.kill(self.process.pid, signal.SIGKILL)
        assert self.process.wait(timeout=20) == -signal.SIGKILL

    def stop(self):
        """SIGTERM, then its exit status; SIGKILL when it does not stop in time."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._log.close()
        return self.process.returncode


@pytest.fixture
def kiosks():
    started = []
    yield started
    for kiosk in started:
        kiosk.stop()


def repeated_random_file(path, size):
    """`size` bytes of one random block over and over (fast to write, no compressible pattern in a
    block); returns the SHA-256 of what was written."""
    block = os.urandom(BLOCK)
    digest = hashlib.sha256()
    with open(path, "wb") as handle:
        left = size
        while left > 0:
            piece = block if left >= BLOCK else block[:left]
            handle.write(piece)
            digest.update(piece)
            left -= len(piece)
    return digest.hexdigest()


def store_entries(tmp_path):
    # `.lock` is the store's lock file (the server holds it while a session lasts); it stays.
    folder = tmp_path / "staging" / ".browserdrop-resumable"
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.name != ".lock")


def only_stored_records(tmp_path):
    """What is left in the resumable store: no bytes of an upload, only the records of stored
    uploads (a record without its partial file), kept until they expire so that a page that lost
    a 201 learns the file arrived."""
    names = store_entries(tmp_path)
    assert names and all(n.endswith(".record") for n in names), names
    return names


def delivered(tmp_path):
    dest = tmp_path / "dest"
    return sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())


def partial_size(tmp_path):
    folder = tmp_path / "staging" / ".browserdrop-resumable"
    try:
        return max((p.stat().st_size for p in folder.glob("*.partial")), default=0)
    except FileNotFoundError:
        return 0  # a partial file renamed while it was looked at


def test_kill_9_mid_upload_then_restart_resumes_from_the_page(page, kiosks, tmp_path):
    """kill -9 of the kiosk once a third of a 1 GiB upload is on its disk; restarted on the same
    staging and port, the page asks where the upload stands and sends only the rest. The batch is
    forwarded once, byte-identical, and nothing of the upload's bytes is left in the store."""
    big = tmp_path / "src" / "film.bin"
    big.parent.mkdir()
    try:
        digest = repeated_random_file(big, SIZE)
        kiosk = Kiosk(tmp_path)
        kiosks.append(kiosk)
        page.record(probe_scale=PROBE_SCALE)
        page.open(kiosk.url)
        page.choose_files([big])
        deadline = time.monotonic() + 120
        while partial_size(tmp_path) < SIZE // 3:
            assert time.monotonic() < deadline, f"a third of the file never arrived: {kiosk.events[-10:]}"
            assert not kiosk.of("uploadFinished"), "the upload ended before the kill"
            time.sleep(0.01)
        kiosk.kill()
        at_kill = partial_size(tmp_path)
        assert not kiosk.of("forwarded") and not kiosk.of("uploadFinished")

        restarted = Kiosk(tmp_path, port=kiosk.port, name="restarted")
        kiosks.append(restarted)
        page.wait_settled(1, timeout=180)
        assert page.rows()[0]["state"] == "uploaded", page.rows()
        forwarded = restarted.wait_for("forwarded", timeout=180)
        assert forwarded["files"] == 1
        resumed = restarted.of("uploadResumed")
        assert len(resumed) == 1 and resumed[0]["offset"] >= at_kill > 0, (at_kill, resumed)
        assert resumed[0]["size"] == SIZE
        requests = page.recorded()["requests"]
        print(f"kiosk kill -9 at {at_kill} of {SIZE} bytes ({at_kill / SIZE:.2f}); resumed at "
              f"{resumed[0]['offset']}; upload requests from the page: {requests}")
        assert requests == {"film.bin": 2}, "the page should send a POST, then one PATCH with the rest"
        assert restarted.stop() == 0
        assert len(restarted.of("forwarded")) == 1
        files = delivered(tmp_path)
        assert files == ["batch 1/film.bin"], files
        assert sha256(tmp_path / "dest" / files[0]) == digest, "the forwarded file differs"
        assert len(only_stored_records(tmp_path)) == 1
    finally:
        # Three copies of a gigabyte: gone at once rather than with pytest's old temporary folders.
        for kiosk in kiosks:
            kiosk.stop()
        for folder in ("src", "dest", "staging"):
            shutil.rmtree(tmp_path / folder, ignore_errors=True)


def test_lost_201_after_a_crash_is_not_sent_again(engine_page, kiosks, tmp_path):
    """The kiosk dies (kill -9 by itself, BROWSERDROP_TEST_CRASH_POINT=resume-stored) after the
    file has its name in the session folder, before the 201 is sent. Restarted, it makes that
    folder a batch, and the page's HEAD hears the upload is complete: the row is uploaded without
    sending the file again, and the destination holds one copy."""
    page = engine_page
    sent = write_file(tmp_path / "src" / "report.pdf.bin", size=2 << 20)
    kiosk = Kiosk(tmp_path, environment={"BROWSERDROP_TEST_CRASH_POINT": "resume-stored"})
    kiosks.append(kiosk)
    page.record(probe_scale=PROBE_SCALE)
    page.open(kiosk.url)
    page.choose_files([sent])
    assert kiosk.wait_exit(timeout=60) == -signal.SIGKILL, "the kiosk did not die at its seam"
    sessions = [p for p in (tmp_path / "staging").iterdir() if (p / sent.name).is_file()]
    assert len(sessions) == 1, "the file was not in the session folder at the crash"
    assert page.rows()[0]["state"] != "uploaded"

    restarted = Kiosk(tmp_path, port=kiosk.port, name="restarted")
    kiosks.append(restarted)
    page.wait_settled(1, timeout=60)
    assert page.rows()[0]["state"] == "uploaded", page.rows()
    assert restarted.wait_for("forwarded", timeout=60)["files"] == 1
    requests = page.recorded()["requests"]
    assert requests == {sent.name: 1}, f"the page sent the file again: {requests}"
    assert not restarted.of("uploadStarted"), restarted.of("uploadStarted")
    assert restarted.stop() == 0
    assert len(restarted.of("forwarded")) == 1
    files = delivered(tmp_path)
    assert files == [f"batch 1/{sent.name}"], files
    assert sha256(tmp_path / "dest" / files[0]) == sha256(sent)
    assert len(only_stored_records(tmp_path)) == 1

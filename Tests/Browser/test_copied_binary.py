"""The `browserdrop` binary copied alone to an empty folder serves the page embedded at build time,
byte for byte the files in Page/, and the page works from it end to end."""

import json
import os
import pathlib
import queue
import shutil
import signal
import subprocess
import threading
import urllib.request

import pytest

from conftest import COMMAND_BINARY, ENGLISH, PAGE_DIR, write_file


class Command:
    """`browserdrop --json` started from a copy, its event lines read on a thread."""

    def __init__(self, binary, args, cwd):
        self.process = subprocess.Popen(
            [str(binary), *args], cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
            env={"PATH": "/usr/bin:/bin", "HOME": str(cwd), "LANG": "C.UTF-8"},
        )
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            if line.strip():
                self.lines.put(json.loads(line))
        self.lines.put({"event": "exited"})

    def wait_for(self, name, timeout=30):
        seen = []
        while True:
            try:
                event = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no {name} within {timeout} s; saw {seen}") from None
            seen.append(event)
            if event.get("event") == name:
                return event
            if event.get("event") == "exited":
                raise AssertionError(f"exited before {name}: {seen}; {self.process.stderr.read()}")

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # this PID only
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


@pytest.fixture
def alone(tmp_path):
    """A copy of the built binary in a folder of its own, nothing beside it."""
    if not os.access(COMMAND_BINARY, os.X_OK):
        pytest.fail(f"browserdrop not found at {COMMAND_BINARY}: build it or set BROWSERDROP_BINARY")
    folder = tmp_path / "alone"
    folder.mkdir()
    copy = folder / "browserdrop"
    shutil.copy2(COMMAND_BINARY, copy)
    return copy


def test_binary_copied_alone_serves_the_embedded_page(alone, page, tmp_path):
    dest = tmp_path / "dest"
    command = Command(alone, ["--json", "--port", "0", "--bind", "127.0.0.1", "--to", str(dest),
                              "--staging", str(tmp_path / "staging")], cwd=alone.parent)
    try:
        listening = command.wait_for("listening")
        url = listening["addresses"][0]["url"]
        assert url.startswith("http://127.0.0.1:")
        assert sorted(p.name for p in alone.parent.iterdir()) == ["browserdrop"]

        # Every file of Page/ is served byte for byte (the embedding changes nothing), / is index.html.
        files = sorted(p for p in PAGE_DIR.rglob("*") if p.is_file() and not p.name.startswith("."))
        assert {p.name for p in files} >= {"index.html", "app.js", "style.css"}
        for path in files:
            relative = path.relative_to(PAGE_DIR).as_posix()
            with urllib.request.urlopen(url + relative, timeout=10) as reply:
                assert reply.read() == path.read_bytes(), f"{relative} differs from Page/{relative}"
        with urllib.request.urlopen(url, timeout=10) as reply:
            assert reply.read() == (PAGE_DIR / "index.html").read_bytes()

        # And the page works from it: one file up, then SIGINT forwards it to --to.
        page.open(url)
        assert page.text("heading") == ENGLISH["title"]
        sent = write_file(tmp_path / "from the copy.txt", text="served by a binary on its own\n")
        page.choose_files([sent])
        page.wait_settled(1)
        assert page.rows()[0]["state"] == "uploaded"
        command.wait_for("uploadFinished")
        command.process.send_signal(signal.SIGINT)
        command.wait_for("forwarded", timeout=60)
        assert command.process.wait(timeout=30) == 0
        assert pathlib.Path(dest / "from the copy.txt").read_bytes() == sent.read_bytes()
    finally:
        command.stop()

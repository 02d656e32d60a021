"""Shared helpers for the kiosk operations tests: the browserdrop binary run as a subprocess with
its JSON event lines read on a thread, a loopback smbd of the test's own, and HTTP on 127.0.0.1.

Environment:
  BROWSERDROP_BINARY  the browserdrop command (default: .build/debug/browserdrop)
"""

import json
import os
import pathlib
import queue
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BINARY = os.environ.get("BROWSERDROP_BINARY", str(ROOT / ".build/debug/browserdrop"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Command:
    """browserdrop with --json; `events` fills from its standard output as lines arrive."""

    def __init__(self, arguments, env=None, launcher=()):
        environment = {"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "LANG": "C.UTF-8"}
        environment.update(env or {})
        self.process = subprocess.Popen(
            [*launcher, BINARY, *arguments],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=environment,
            text=True,
        )
        self.events = []
        self.lines = queue.Queue()
        self.errors = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_errors, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            event = json.loads(line)
            self.events.append(event)
            self.lines.put(event)
        self.lines.put(None)

    def _read_errors(self):
        for line in self.process.stderr:
            self.errors.append(line)

    def wait_for(self, name, timeout=30, after=0, match=lambda event: True):
        """The first event `name` at or after index `after` that `match` accepts."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for event in self.events[after:]:
                if event.get("event") == name and match(event):
                    return event
            if self.process.poll() is not None and self.lines.empty():
                break
            try:
                self.lines.get(timeout=0.1)
            except queue.Empty:
                pass
        raise AssertionError(
            f"no {name} event in {timeout} s; events: {self.events}; stderr: {''.join(self.errors)}"
        )

    def upload_port(self):
        listening = self.wait_for("listening")
        return int(listening["addresses"][0]["url"].rsplit(":", 1)[1].rstrip("/"))

    def stop(self, expect=0):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        status = self.process.wait(timeout=60)
        assert status == expect, f"status {status}; stderr: {''.join(self.errors)}"

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)


class SMBServer:
    """The project's loopback smbd (scripts/smbd.sh) in a folder of the test's own."""

    def __init__(self, base):
        self.base = base
        self.port = free_port()
        os.chmod(base, 0o755)

    def _run(self, verb):
        subprocess.run(
            ["scripts/smbd.sh", verb],
            cwd=ROOT,
            env={**os.environ, "BASE": str(self.base), "PORT": str(self.port)},
            check=True,
            timeout=120,
        )

    def up(self):
        self._run("up")

    def down(self):
        self._run("down")

    @property
    def guest_share(self):
        return pathlib.Path(self.base) / "shares" / "guest"


@pytest.fixture
def smbd():
    if os.geteuid() != 0:
        pytest.skip("the loopback smbd needs root (useradd, a tmpfs, uid switches)")
    # Not under pytest's tmp_path, whose 0700 parents the guest account (nobody) can't cross.
    base = pathlib.Path(tempfile.mkdtemp(prefix="browserdrop-ops-smbd."))
    server = SMBServer(base)
    server.up()
    yield server
    server.down()
    shutil.rmtree(base, ignore_errors=True)

"""--name through a real avahi-daemon: two test hosts, each a network namespace with a mount
namespace of its own (its own /run, D-Bus and avahi-daemon), joined by a veth pair (lan.py). The
kiosk runs on host A and publishes through the library's setting (Configuration.localName); host
B resolves its name with avahi-resolve, finds its service with avahi-browse, reads the name in
config.json, takes the name first with avahi-publish to force a conflict, and sees the records
follow an address change, a daemon restart and the kiosk's batches. The namespaces, the veth pair
and every daemon are the test's own and are removed after."""

import os
import pathlib
import queue
import signal
import subprocess
import threading
import time

import pytest

from conftest import BINARY, Command
from lan import config_json, lan, needs_lan, run  # noqa: F401 (lan is a fixture)

pytestmark = needs_lan


def kiosk(host, tmp_path, name="intake"):
    return Command(
        ["--kiosk", "--json", "--port", "0", "--staging", str(tmp_path / "staging"),
         "--to", str(tmp_path / "dest"), "--name", name],
        launcher=host.enter(),
    )


def advertised(command, name, after=0):
    """Waits for the notice that `name`.local is published, and the address list led by it."""
    command.wait_for(
        "notice", after=after, match=lambda e: e["message"].startswith(f"Advertised as http://{name}.local:")
    )
    changed = command.wait_for(
        "addressesChanged", after=after, match=lambda e: e["addresses"][0]["url"].startswith(f"http://{name}.local:")
    )
    return changed["addresses"]


def test_the_name_resolves_and_the_service_is_found_from_another_host(lan, tmp_path):
    a, b = lan
    command = kiosk(a, tmp_path)
    try:
        port = command.upload_port()
        addresses = advertised(command, "intake")
        assert [entry["url"] for entry in addresses] == [
            f"http://intake.local:{port}/", f"http://{a.address}:{port}/"
        ]
        b.resolve("intake.local", a.address)
        assert (f"BrowserDrop on intake", "intake.local", a.address, port, '"path=/"') in b.browse()
        # The page learns the name in use from config.json, read by address as a phone that
        # scanned the QR code would.
        assert config_json(b, a.address, port)["localName"] == "intake.local"
        # From host B, by name, as a person types it: the Host rules admit the advertised name
        # and its trailing-dot form, and the page's own uploads (Origin) go through.
        for host in ["intake.local", "intake.local."]:
            result = b.run(
                "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10",
                "--resolve", f"{host}:{port}:{a.address}", f"http://{host}:{port}/config.json",
            )
            assert result.stdout == "200", host
        upload = b.run(
            "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10",
            "--resolve", f"intake.local:{port}:{a.address}", "-H", f"Origin: http://intake.local:{port}",
            "--data-binary", "hello", f"http://intake.local:{port}/upload?path=hello.txt",
        )
        assert upload.stdout == "201"
    finally:
        command.stop()
    # Stopped: the records are withdrawn (avahi-daemon drops them with the client).
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if b.run("avahi-resolve", "-4", "-n", "intake.local", timeout=15, check=False).stdout == "":
            break
    else:
        raise AssertionError("intake.local still resolves after the kiosk stopped")


def test_a_taken_name_moves_to_avahis_alternative(lan, tmp_path):
    a, b = lan
    squatter = b.popen("avahi-publish", "-a", "-R", "intake.local", b.address)
    try:
        # avahi-publish says when its record is established.
        established = queue.Queue()
        threading.Thread(
            target=lambda: [established.put(line) for line in squatter.stdout], daemon=True
        ).start()
        line = established.get(timeout=30)
        assert "Established under name 'intake.local'" in line, line
        command = kiosk(a, tmp_path)
        try:
            port = command.upload_port()
            command.wait_for(
                "notice", match=lambda e: "trying intake-2.local (Avahi's alternative)" in e["message"]
            )
            addresses = advertised(command, "intake-2")
            assert addresses[0]["url"] == f"http://intake-2.local:{port}/"
            b.resolve("intake-2.local", a.address)
            b.resolve("intake.local", b.address)  # the squatter keeps its own
            assert config_json(b, a.address, port)["localName"] == "intake-2.local"
            assert ("BrowserDrop on intake-2", "intake-2.local", a.address, port, '"path=/"') in b.browse()
        finally:
            command.stop()
    finally:
        squatter.terminate()
        squatter.wait(timeout=30)


def test_the_records_follow_an_address_change(lan, tmp_path):
    a, b = lan
    command = kiosk(a, tmp_path)
    try:
        port = command.upload_port()
        advertised(command, "intake")
        b.resolve("intake.local", a.address)
        count = len(command.events)
        # Another subnet: deleting a primary address would take its secondaries with it.
        run("ip", "-n", a.netns, "addr", "add", "10.215.0.1/24", "dev", a.interface)
        run("ip", "-n", a.netns, "addr", "del", "10.214.0.1/24", "dev", a.interface)
        changed = command.wait_for(
            "addressesChanged", after=count,
            match=lambda e: [x["url"] for x in e["addresses"]]
            == [f"http://intake.local:{port}/", f"http://10.215.0.1:{port}/"],
        )
        assert changed
        b.resolve("intake.local", "10.215.0.1")
    finally:
        command.stop()


def test_the_name_comes_back_when_avahi_daemon_restarts(lan, tmp_path):
    a, b = lan
    command = kiosk(a, tmp_path)
    replacement = None
    try:
        port = command.upload_port()
        advertised(command, "intake")
        b.resolve("intake.local", a.address)
        # The daemon lan_host.sh started, stopped by its PID (avahi-daemon writes it in /run).
        pid = int(a.run("cat", "/run/avahi-daemon/pid").stdout)
        count = len(command.events)
        os.kill(pid, signal.SIGTERM)
        command.wait_for(
            "notice", after=count,
            match=lambda e: e["message"].startswith("avahi-daemon stopped advertising intake.local"),
        )
        # Not published meanwhile: config.json says nothing of it, and the list drops it.
        assert "localName" not in config_json(b, a.address, port)
        command.wait_for(
            "addressesChanged", after=count,
            match=lambda e: [x["url"] for x in e["addresses"]] == [f"http://{a.address}:{port}/"],
        )
        replacement = a.popen(
            "avahi-daemon", f"--file={a.scratch}/avahi.conf", "--no-drop-root", "--no-chroot",
            "--no-rlimits", "--no-proc-title",
        )
        b.resolve("intake.local", a.address, timeout=60)
        advertised(command, "intake", after=count)
        assert config_json(b, a.address, port)["localName"] == "intake.local"
        assert command.process.poll() is None
    finally:
        command.stop()
        if replacement is not None:
            replacement.terminate()
            replacement.wait(timeout=30)


def first_config(host, address, port, timeout=10):
    """config.json from the first answer of a session that is starting (a refused connection
    means it does not listen yet), polled for at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return config_json(host, address, port)
        except subprocess.CalledProcessError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def avahi_threads(command):
    """The kiosk's threads named bd-avahi (each runs one advertisement's loop)."""
    tasks = pathlib.Path(f"/proc/{command.process.pid}/task")
    return sum(1 for task in tasks.iterdir() if (task / "comm").read_text().strip() == "bd-avahi")


def test_the_next_batch_takes_the_name_over_without_publishing_it_again(lan, tmp_path):
    """Each kiosk batch is a session of its own: the next one takes over the advertisement the
    last one held (same name, same port), so the name never stops resolving, config.json has it
    from the new session's first request, and no second thread or announcement appears."""
    a, b = lan
    command = Command(
        ["--kiosk", "--json", "--port", "0", "--quiet-period", "0.3", "--staging",
         str(tmp_path / "staging"), "--to", str(tmp_path / "dest"), "--name", "intake"],
        launcher=a.enter(),
    )
    try:
        port = command.upload_port()
        advertised(command, "intake")
        b.resolve("intake.local", a.address)
        assert avahi_threads(command) == 1
        # Batches until the first hand-over is more than its 5 s old, so the first session's
        # expiry has come and gone (it must stop nothing the next session holds); at most 30.
        first_handover = None
        for batch in range(1, 31):
            count = len(command.events)
            upload = b.run(
                "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10",
                "--data-binary", f"batch {batch}", f"http://{a.address}:{port}/upload?path={batch}.txt",
            )
            assert upload.stdout == "201"
            command.wait_for("forwarded", after=count)
            first_handover = first_handover or time.monotonic()
            # The next session's first answer already has the name.
            assert first_config(b, a.address, port)["localName"] == "intake.local"
            b.resolve("intake.local", a.address, timeout=5)
            assert avahi_threads(command) == 1
            if time.monotonic() - first_handover > 6:
                break
        assert time.monotonic() - first_handover > 6, "fewer batches than the hand-over time"
        notices = [e["message"] for e in command.events if e.get("event") == "notice"]
        assert sum(1 for m in notices if m.startswith("Advertised as")) == 1, notices
    finally:
        command.stop()


def test_without_avahi_daemon_one_line_names_it_and_the_kiosk_goes_on(tmp_path):
    # An empty /run of its own: no system bus, no avahi-daemon, whatever this machine runs.
    command = Command(
        ["--kiosk", "--json", "--port", "0", "--bind", "127.0.0.1", "--quiet-period", "0.3",
         "--staging", str(tmp_path / "staging"), "--to", str(tmp_path / "dest"), "--name", "intake"],
        launcher=["unshare", "--mount", "--propagation", "private", "sh", "-c",
                  'mount -t tmpfs tmpfs /run && exec "$@"', "sh"],
    )
    try:
        port = command.upload_port()
        notice = command.wait_for("notice", match=lambda e: "avahi-daemon" in e["message"])
        assert notice["message"].startswith("avahi-daemon isn't running")
        assert "intake.local isn't advertised" in notice["message"]
        result = run(
            "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10",
            "--data-binary", "x", f"http://127.0.0.1:{port}/upload?path=x.txt",
        )
        assert result.stdout == "201"
        command.wait_for("forwarded")
    finally:
        command.stop()
    notices = [e for e in command.events if e.get("event") == "notice" and "avahi" in e["message"]]
    assert len(notices) == 1, notices
    assert not any("http://intake.local" in str(e) for e in command.events)


def test_without_name_avahi_is_never_loaded(tmp_path):
    command = Command(
        ["--json", "--port", "0", "--bind", "127.0.0.1", "--staging", str(tmp_path / "s")]
    )
    try:
        command.upload_port()
        maps = pathlib.Path(f"/proc/{command.process.pid}/maps").read_text()
        assert "libavahi" not in maps and "libdbus" not in maps and "libsystemd" not in maps
    finally:
        command.stop()


@pytest.mark.parametrize("value", ["", "-intake", "in take", "a.b", "x" * 64, "ünï"])
def test_a_bad_name_names_the_flag(value):
    result = run(BINARY, "--name", value, check=False)
    assert result.returncode == 2
    assert "--name" in result.stderr

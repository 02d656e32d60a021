"""--name through a real avahi-daemon: two test hosts, each a network namespace with a mount
namespace of its own (its own /run, D-Bus and avahi-daemon), joined by a veth pair. The kiosk runs
on host A; host B resolves its name with avahi-resolve, finds its service with avahi-browse, takes
the name first with avahi-publish to force a conflict, and sees the records follow an address
change. The namespaces, the veth pair and every daemon are the test's own and are removed after."""

import os
import pathlib
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import BINARY, Command

HERE = pathlib.Path(__file__).resolve().parent
NEEDED = ["ip", "unshare", "nsenter", "dbus-daemon", "avahi-daemon", "avahi-resolve", "avahi-browse", "avahi-publish", "curl"]

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or any(shutil.which(tool) is None for tool in NEEDED),
    reason="needs root and " + ", ".join(NEEDED) + " (scripts/setup.sh --test)",
)


def run(*command, timeout=30, check=True):
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=check)


class Host:
    """A test host: `netns` with one veth end at `address`, its own /run, D-Bus and avahi."""

    def __init__(self, netns, interface, address, avahi_name, scratch):
        self.netns, self.interface, self.address = netns, interface, address
        self.scratch = scratch
        scratch.mkdir()
        self.holder = subprocess.Popen(
            ["ip", "netns", "exec", netns, "unshare", "--mount", "--propagation", "private",
             str(HERE / "lan_host.sh"), interface, avahi_name, str(scratch)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        self.log = []
        ready = threading.Event()

        def read():
            for line in self.holder.stdout:
                self.log.append(line)
                if "Server startup complete" in line:
                    ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(30):
            self.stop()
            raise AssertionError("avahi-daemon did not start: " + "".join(self.log))

    def enter(self):
        """The prefix that runs a program on this host (its network and its /run)."""
        return ["nsenter", f"--net=/run/netns/{self.netns}", f"--mount=/proc/{self.holder.pid}/ns/mnt", "--"]

    def run(self, *command, timeout=30, check=True):
        return run(*self.enter(), *command, timeout=timeout, check=check)

    def popen(self, *command):
        return subprocess.Popen(
            [*self.enter(), *command], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True,
        )

    def resolve(self, name, expect, timeout=30):
        """avahi-resolve on this host until `name` resolves to `expect`."""
        deadline = time.monotonic() + timeout
        seen = None
        while time.monotonic() < deadline:
            result = self.run("avahi-resolve", "-4", "-n", name, timeout=15, check=False)
            seen = result.stdout.strip() + result.stderr.strip()
            if result.stdout.split() == [name, expect]:
                return
        raise AssertionError(f"{name} did not resolve to {expect} in {timeout} s; last: {seen!r}")

    def browse(self, timeout=30):
        """avahi-browse's resolved _http._tcp services: (name, host, address, port, txt)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = self.run("avahi-browse", "-rtp", "_http._tcp", timeout=20, check=False)
            found = [
                (fields[3].replace("\\032", " "), fields[6], fields[7], int(fields[8]), fields[9])
                for fields in (line.split(";") for line in result.stdout.splitlines())
                if fields[0] == "=" and len(fields) >= 10
            ]
            if found:
                return found
        return []

    def stop(self):
        if self.holder.poll() is None:
            self.holder.terminate()
            try:
                self.holder.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.holder.kill()
                self.holder.wait(timeout=30)


@pytest.fixture
def lan():
    tag = f"{os.getpid() % 100000}"
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="browserdrop-ops-lan."))
    names = [f"bdops-{tag}-a", f"bdops-{tag}-b"]
    ends = [f"bdo{tag}a", f"bdo{tag}b"]
    hosts = []
    try:
        for name in names:
            run("ip", "netns", "add", name)
        run("ip", "link", "add", ends[0], "type", "veth", "peer", "name", ends[1])
        for name, end, address in zip(names, ends, ["10.214.0.1/24", "10.214.0.2/24"]):
            run("ip", "link", "set", end, "netns", name)
            run("ip", "-n", name, "addr", "add", address, "dev", end)
            run("ip", "-n", name, "link", "set", end, "up")
        for name, end, address, label in zip(names, ends, ["10.214.0.1", "10.214.0.2"], ["hosta", "hostb"]):
            hosts.append(Host(name, end, address, label, scratch / label))
        yield hosts
    finally:
        for host in hosts:
            host.stop()
        for name in names:
            run("ip", "netns", "del", name, check=False)  # the veth pair goes with them
        shutil.rmtree(scratch, ignore_errors=True)


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
        command.upload_port()
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
        replacement = a.popen(
            "avahi-daemon", f"--file={a.scratch}/avahi.conf", "--no-drop-root", "--no-chroot",
            "--no-rlimits", "--no-proc-title",
        )
        b.resolve("intake.local", a.address, timeout=60)
        assert command.process.poll() is None
    finally:
        command.stop()
        if replacement is not None:
            replacement.terminate()
            replacement.wait(timeout=30)


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

"""Two test hosts on a LAN of the tests' own: each a network namespace with a mount namespace of
its own (its own /run, D-Bus and avahi-daemon, started by lan_host.sh), joined by a veth pair.
Used by Tests/Operations/test_avahi.py and Tests/Browser/test_name.py; self-contained (no conftest
import), so both test folders can load it. The namespaces, the veth pair and every daemon are
removed afterwards, each process stopped by its PID."""

import contextlib
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import threading
import time

import pytest

HERE = pathlib.Path(__file__).resolve().parent
NEEDED = ["ip", "unshare", "nsenter", "dbus-daemon", "avahi-daemon", "avahi-resolve", "avahi-browse", "avahi-publish", "curl"]

needs_lan = pytest.mark.skipif(
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
    with lan_pair() as hosts:
        yield hosts


@contextlib.contextmanager
def lan_pair():
    """The two hosts A (10.214.0.1) and B (10.214.0.2), removed when the block ends."""
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


def config_json(host, address, port, name=None):
    """config.json as `host` reads it from `address` (by `name` when given, resolved to it)."""
    target = name or address
    extra = ["--resolve", f"{name}:{port}:{address}"] if name else []
    result = host.run("curl", "-sS", "--max-time", "10", *extra, f"http://{target}:{port}/config.json")
    return json.loads(result.stdout)

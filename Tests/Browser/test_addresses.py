"""The address list and .addressesChanged, seen from a host running in a network namespace the
test makes for itself (root only, as scripts/test.sh runs). Interfaces come and go inside the
namespace; nothing outside it changes and no traffic is sent anywhere."""

import json
import os
import queue
import subprocess
import threading
import time
import uuid

import pytest

from conftest import HOST_BINARY

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")


def ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


class NamespacedHost:
    def __init__(self, namespace, staging):
        self.process = subprocess.Popen(
            ["ip", "netns", "exec", namespace, HOST_BINARY, "--staging", str(staging), "--bind", "all"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.put(json.loads(line))

    def next_event(self, name, timeout=15):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                event = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if event.get("event") == name:
                return event
        raise AssertionError(f"no {name} event within {timeout} s")

    def stop(self):
        try:
            self.process.stdin.close()
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


@pytest.fixture
def namespace():
    name = "bd-test-" + uuid.uuid4().hex[:8]
    ip("netns", "add", name)
    ip("-n", name, "link", "set", "lo", "up")
    yield name
    ip("netns", "delete", name)


def add_interface(namespace, name, address):
    # This kernel has no dummy driver, so each interface is one end of a veth pair whose other
    # end (named veth…, which the server hides like every container link) stays unaddressed.
    peer = "veth" + name
    ip("-n", namespace, "link", "add", name, "type", "veth", "peer", "name", peer)
    ip("-n", namespace, "addr", "add", address, "dev", name)
    ip("-n", namespace, "link", "set", peer, "up")
    ip("-n", namespace, "link", "set", name, "up")


def urls(event):
    return [address["url"] for address in event["addresses"]]


def test_addresses_follow_interfaces_and_skip_virtual_ones(namespace, tmp_path):
    # Interfaces a person cannot reach the page through: a container bridge, a VPN and a
    # link-local-only interface. They must never be listed.
    for name, address in (("docker0", "172.17.0.1/16"), ("wg0", "10.66.0.2/24"), ("eth7", "169.254.3.4/16")):
        add_interface(namespace, name, address)
    host = NamespacedHost(namespace, tmp_path)
    try:
        listening = host.next_event("listening")
        port = listening["port"]
        # Only loopback-less virtual interfaces exist, so the loopback address is offered.
        assert listening["url"] in (f"http://127.0.0.1:{port}/", f"http://[::1]:{port}/")

        add_interface(namespace, "lan0", "10.200.0.1/24")
        changed = host.next_event("addressesChanged")
        assert urls(changed) == [f"http://10.200.0.1:{port}/"]
        assert changed["addresses"][0]["kind"] == "other"  # a virtual link is neither wired nor Wi-Fi

        ip("-n", namespace, "link", "delete", "lan0")
        back = host.next_event("addressesChanged")
        assert all("10.200.0.1" not in url for url in urls(back))
    finally:
        host.stop()

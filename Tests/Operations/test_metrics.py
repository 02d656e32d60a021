"""--metrics: /metrics read back with Prometheus's own text parser, every family checked against a
known sequence of uploads and forwards (a forward to an smbd that was stopped among them), and
/healthz following the listener and the last forward. Everything on 127.0.0.1."""

import http.client
import os
import socket
import subprocess
import time
import urllib.parse

import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import BINARY, Command

FAMILIES = {
    "browserdrop_uploads": "counter",
    "browserdrop_received_bytes": "counter",
    "browserdrop_uploads_in_flight": "gauge",
    "browserdrop_uploads_paused": "gauge",
    "browserdrop_staging_free_bytes": "gauge",
    "browserdrop_outbox_batches": "gauge",
    "browserdrop_forwards": "counter",
    "browserdrop_forward_possible_leftovers": "counter",
    "browserdrop_last_forward_success_timestamp_seconds": "gauge",
    "browserdrop_destination_reachable": "gauge",
    "browserdrop_listening": "gauge",
    "browserdrop_event_loop_lag_seconds": "gauge",
}
UPLOAD_OUTCOMES = [
    "stored", "connection_lost", "timed_out", "path_conflict", "unsupported_type",
    "insufficient_storage", "write_failed", "cancelled",
]


def get(port, path, method="GET"):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, path)
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type"), response.read().decode()
    finally:
        connection.close()


def scrape(port):
    """{sample name: {labels-tuple: value}} and each family's type, from the real parser."""
    status, content_type, body = get(port, "/metrics")
    assert status == 200
    assert content_type == "text/plain; version=0.0.4; charset=utf-8"
    values, types = {}, {}
    for family in text_string_to_metric_families(body):
        types[family.name] = family.type
        for sample in family.samples:
            values.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return values, types


def value(values, family, **labels):
    return values[family][tuple(sorted(labels.items()))]


def upload(port, path, body):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request(
            "POST", "/upload?path=" + urllib.parse.quote(path, safe=""), body=body,
            headers={"Content-Type": "application/octet-stream"},
        )
        return connection.getresponse().status
    finally:
        connection.close()


def start_partial_upload(port, path, size, sent):
    """An upload whose head and first `sent` bytes are sent; the socket stays open."""
    client = socket.create_connection(("127.0.0.1", port), timeout=10)
    client.sendall(
        (
            f"POST /upload?path={urllib.parse.quote(path, safe='')} HTTP/1.1\r\n"
            f"Host: 127.0.0.1:{port}\r\nContent-Length: {size}\r\n\r\n"
        ).encode()
        + b"x" * sent
    )
    return client


def wait_until(port, predicate, what, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        values, _ = scrape(port)
        if predicate(values):
            return values
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not seen in {timeout} s; last scrape: {values}")
        time.sleep(0.1)


def metrics_port(command):
    notice = command.wait_for("notice", match=lambda e: e["message"].startswith("Metrics at "))
    url = notice["message"].split()[2].rstrip(",")
    parsed = urllib.parse.urlparse(url)
    assert parsed.hostname == "127.0.0.1" and parsed.path == "/metrics"
    return parsed.port


def test_every_family_follows_uploads_and_forwards(tmp_path, smbd):
    staging = tmp_path / "staging"
    command = Command([
        "--kiosk", "--json", "--port", "0", "--bind", "127.0.0.1", "--quiet-period", "0.5",
        "--staging", str(staging), "--to", f"smb://127.0.0.1:{smbd.port}/guest/metrics",
        "--batch-folder", "batch {n}", "--metrics", "0",
    ])
    try:
        upload_port = command.upload_port()
        port = metrics_port(command)
        assert port != upload_port

        # At start: every family, every labelled outcome at 0, types as declared.
        # The disk and the destination are probed off the loop, a moment after start.
        wait_until(
            port,
            lambda v: "browserdrop_staging_free_bytes" in v
            and "browserdrop_destination_reachable" in v,
            "first probe",
        )
        values, types = scrape(port)
        assert types == FAMILIES
        for outcome in UPLOAD_OUTCOMES:
            assert value(values, "browserdrop_uploads_total", outcome=outcome) == 0
        assert value(values, "browserdrop_forwards_total", outcome="ok") == 0
        assert value(values, "browserdrop_forwards_total", outcome="failed") == 0
        assert value(values, "browserdrop_forward_possible_leftovers_total") == 0
        assert value(values, "browserdrop_last_forward_success_timestamp_seconds") == 0
        assert value(values, "browserdrop_listening") == 1
        assert value(values, "browserdrop_destination_reachable") == 1
        assert value(values, "browserdrop_outbox_batches") == 0
        assert value(values, "browserdrop_uploads_paused") == 0
        statvfs = os.statvfs(staging)
        free = statvfs.f_bavail * statvfs.f_frsize
        assert abs(value(values, "browserdrop_staging_free_bytes") - free) < max(free // 50, 1 << 26)
        assert get(port, "/healthz")[0] == 200

        # An upload in flight, held open: counted, then lost when the client goes away.
        client = start_partial_upload(upload_port, "held.bin", 100_000, 1000)
        wait_until(port, lambda v: value(v, "browserdrop_uploads_in_flight") == 1, "in flight")
        client.close()
        command.wait_for("uploadFailed")
        # Two files stored, and one refused for its content (an ELF named as a picture).
        assert upload(upload_port, "a.bin", b"a" * 30_000) == 201
        assert upload(upload_port, "b.bin", b"b" * 12_345) == 201
        assert upload(upload_port, "c.png", b"\x7fELF\x02\x01\x01" + b"\0" * 2000) == 400
        first = command.wait_for("forwarded")
        values = wait_until(
            port, lambda v: value(v, "browserdrop_forwards_total", outcome="ok") == 1, "forward"
        )
        assert value(values, "browserdrop_uploads_total", outcome="stored") == 2
        assert value(values, "browserdrop_uploads_total", outcome="connection_lost") == 1
        assert value(values, "browserdrop_uploads_total", outcome="unsupported_type") == 1
        assert value(values, "browserdrop_received_bytes_total") == 30_000 + 12_345
        assert value(values, "browserdrop_uploads_in_flight") == 0
        assert value(values, "browserdrop_outbox_batches") == 0
        assert abs(value(values, "browserdrop_last_forward_success_timestamp_seconds") - time.time()) < 30
        assert value(values, "browserdrop_event_loop_lag_seconds") < 1
        assert (smbd.guest_share / "metrics" / "batch 1" / "a.bin").stat().st_size == 30_000
        assert get(port, "/healthz")[0] == 200
        success = value(values, "browserdrop_last_forward_success_timestamp_seconds")

        # The NAS goes down: the next batch fails and stays; health says why.
        smbd.down()
        count = len(command.events)
        assert upload(upload_port, "c.bin", b"c" * 5000) == 201
        command.wait_for("forwardFailed", after=count)
        values = wait_until(
            port, lambda v: value(v, "browserdrop_destination_reachable") == 0, "unreachable"
        )
        assert value(values, "browserdrop_forwards_total", outcome="failed") >= 1
        assert value(values, "browserdrop_forwards_total", outcome="ok") == 1
        assert value(values, "browserdrop_outbox_batches") == 1
        assert value(values, "browserdrop_last_forward_success_timestamp_seconds") == success
        status, _, reason = get(port, "/healthz")
        assert status == 503
        assert reason.startswith("The last forward failed: ") and "127.0.0.1" in reason

        # Back up: the retry delivers it and health recovers.
        smbd.up()
        command.wait_for("forwarded", after=count, timeout=60)
        values = wait_until(
            port, lambda v: value(v, "browserdrop_forwards_total", outcome="ok") == 2, "retry"
        )
        assert value(values, "browserdrop_outbox_batches") == 0
        assert value(values, "browserdrop_uploads_total", outcome="stored") == 3
        assert value(values, "browserdrop_destination_reachable") == 1
        assert value(values, "browserdrop_last_forward_success_timestamp_seconds") > success
        assert get(port, "/healthz")[0] == 200
    finally:
        command.stop()


def test_never_on_the_upload_port_and_nothing_else_on_its_own(tmp_path):
    command = Command([
        "--json", "--port", "0", "--bind", "127.0.0.1", "--staging", str(tmp_path / "s"),
        "--metrics", "127.0.0.1:0",
    ])
    try:
        upload_port = command.upload_port()
        port = metrics_port(command)
        status, _, body = get(upload_port, "/metrics")
        assert status == 404 and "browserdrop_" not in body
        assert get(upload_port, "/healthz")[0] == 404
        assert get(port, "/")[0] == 404
        assert get(port, "/metrics", method="POST")[0] == 405
        assert get(port, "/metrics", method="HEAD")[0] == 200
    finally:
        command.stop()


def test_the_event_loop_lag_shows_a_blocked_loop(tmp_path):
    command = Command(
        ["--json", "--port", "0", "--bind", "127.0.0.1", "--staging", str(tmp_path / "s"),
         "--metrics", "0"],
        env={"BROWSERDROP_TEST_LOOP_STALL": "1500:3000"},
    )
    try:
        command.upload_port()
        port = metrics_port(command)
        # The metrics thread answers while the loop is blocked: the lag grows past a second.
        values = wait_until(
            port, lambda v: value(v, "browserdrop_event_loop_lag_seconds") > 1, "lag", timeout=20
        )
        values = wait_until(
            port, lambda v: value(v, "browserdrop_event_loop_lag_seconds") < 0.5, "recovery",
            timeout=20,
        )
    finally:
        command.stop()


@pytest.mark.parametrize("value", ["", "x", "65536", "localhost:9464", "1.2.3:80", "[::1]", "[zz]:80"])
def test_a_bad_metrics_address_names_the_flag(value):
    result = subprocess.run(
        [BINARY, "--metrics", value], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 2
    assert "--metrics" in result.stderr and repr(value)[1:-1] in result.stderr


def test_a_taken_metrics_port_fails_at_start_naming_the_flag(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [BINARY, "--port", "0", "--bind", "127.0.0.1", "--staging", str(tmp_path / "s"),
             "--metrics", f"127.0.0.1:{port}"],
            capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
        )
    assert result.returncode == 1
    assert f"127.0.0.1:{port} (--metrics)" in result.stderr and "taken" in result.stderr


def test_help_describes_the_operations_flags():
    result = subprocess.run([BINARY, "--help"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0
    for text in ["OPERATIONS:", "--name NAME", "--metrics ADDRESS:PORT", "NAME-2", "Type=notify", "WatchdogSec="]:
        assert text in result.stdout, text


def test_paused_uploads_are_counted_until_they_resume(tmp_path):
    """A resumable upload cut off is paused (BrowserDropServer.pauses), not in flight; the gauge
    follows it back to 0 when a PATCH completes it."""
    command = Command([
        "--json", "--port", "0", "--bind", "127.0.0.1", "--staging", str(tmp_path / "s"),
        "--metrics", "0",
    ])
    upload_id = os.urandom(16).hex()
    target = f"/upload?path=resumed.bin&upload={upload_id}"
    body = os.urandom(200_000)
    try:
        upload_port = command.upload_port()
        port = metrics_port(command)
        values, _ = scrape(port)
        assert value(values, "browserdrop_uploads_paused") == 0
        # The first 50,000 bytes, then the client goes away: the server keeps them.
        client = socket.create_connection(("127.0.0.1", upload_port), timeout=10)
        client.sendall(
            (
                f"POST {target} HTTP/1.1\r\nHost: 127.0.0.1:{upload_port}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            ).encode()
            + body[:50_000]
        )
        wait_until(port, lambda v: value(v, "browserdrop_uploads_in_flight") == 1, "in flight")
        client.close()
        command.wait_for("uploadPaused")
        values = wait_until(port, lambda v: value(v, "browserdrop_uploads_paused") == 1, "paused")
        assert value(values, "browserdrop_uploads_in_flight") == 0
        assert value(values, "browserdrop_uploads_total", outcome="connection_lost") == 0
        # Where it stands, then the rest.
        connection = http.client.HTTPConnection("127.0.0.1", upload_port, timeout=10)
        connection.request("HEAD", target)
        response = connection.getresponse()
        response.read()
        connection.close()
        assert response.status == 204
        offset = int(response.getheader("Upload-Offset"))
        assert 0 < offset <= 50_000
        connection = http.client.HTTPConnection("127.0.0.1", upload_port, timeout=30)
        connection.request("PATCH", target, body=body[offset:], headers={"Upload-Offset": str(offset)})
        status = connection.getresponse().status
        connection.close()
        assert status == 201
        values = wait_until(
            port, lambda v: value(v, "browserdrop_uploads_total", outcome="stored") == 1, "stored"
        )
        assert value(values, "browserdrop_uploads_paused") == 0
        assert value(values, "browserdrop_uploads_in_flight") == 0
        assert value(values, "browserdrop_received_bytes_total") == len(body)
    finally:
        command.stop()

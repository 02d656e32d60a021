#!/usr/bin/env python3
"""Resume benchmark: one large upload sent whole, against the same upload cut at half and
resumed (HEAD, then PATCH with the rest), on the `browserdrop` command on 127.0.0.1 with its
defaults (durability and sniffing on). Alternates the two, REPS times each, in one run.

    Benchmarks/resume.py                         # 1 GiB, 5 rounds, .build/release/browserdrop
    SIZE_MB=256 REPS=3 BIN=.build/debug/browserdrop Benchmarks/resume.py

Reports the medians (min-max), their ratio, and what resuming adds before the rest flows: the
HEAD's round trip (which waits for the cut request to be flushed and recorded, when it still
holds the upload) and the PATCH's connect and head. Every stored file is compared with what was
sent. Only 127.0.0.1 is contacted; the server is started here and stopped by its PID.
"""

import base64
import filecmp
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MiB = 1 << 20
SIZE = int(os.environ.get("SIZE_MB", 1024)) * MiB
REPS = int(os.environ.get("REPS", 5))
BIN = os.environ.get("BIN", os.path.join(ROOT, ".build/release/browserdrop"))
SCRATCH = os.environ.get("SCRATCH", "/tmp/browserdrop-resume-bench")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def reply(sock):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head = data.split(b"\r\n\r\n", 1)[0].decode()
    lines = head.split("\r\n")
    headers = {k.lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:] if ":" in l)}
    return int(lines[0].split()[1]), headers


def request(port, method, target, headers, source=None, offset=0, count=0, cut=False):
    """Sends one request, the body `count` bytes of `source` from `offset`; returns the status,
    the headers and the seconds until the head was sent (connect included)."""
    started = time.monotonic()
    sock = socket.create_connection(("127.0.0.1", port))
    head = "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % (method, target, port)
    head += "".join("%s: %s\r\n" % item for item in headers.items()) + "\r\n"
    sock.sendall(head.encode())
    head_sent = time.monotonic() - started
    if count:
        with open(source, "rb") as f:
            sock.sendfile(f, offset, count)
    if cut:
        sock.close()
        return None, {}, head_sent
    status, answer = reply(sock)
    sock.close()
    return status, answer, head_sent


def upload(port, source, name, cut_at=None):
    upload_id = base64.urlsafe_b64encode(secrets.token_bytes(16)).rstrip(b"=").decode()
    target = "/upload?path=%s&upload=%s" % (name, upload_id)
    origin = {"Origin": "http://127.0.0.1:%d" % port}
    started = time.monotonic()
    if cut_at is None:
        status, _, _ = request(port, "POST", target, dict(origin, **{"Content-Length": SIZE}),
                               source, 0, SIZE)
        return time.monotonic() - started, status, None
    request(port, "POST", target, dict(origin, **{"Content-Length": SIZE}), source, 0, cut_at,
            cut=True)
    probe_started = time.monotonic()
    status, answer, _ = request(port, "HEAD", target, {})
    head_rtt = time.monotonic() - probe_started
    assert status == 204, status
    offset = int(answer["upload-offset"])
    status, _, patch_start = request(
        port, "PATCH", target,
        dict(origin, **{"Upload-Offset": offset, "Content-Length": SIZE - offset}),
        source, offset, SIZE - offset)
    return time.monotonic() - started, status, (head_rtt, patch_start, offset)


def main():
    if not os.path.exists(BIN):
        sys.exit("no %s: build it (swift build -c release) or set BIN" % BIN)
    shutil.rmtree(SCRATCH, ignore_errors=True)
    os.makedirs(SCRATCH)
    source = os.path.join(SCRATCH, "source.bin")
    with open(source, "wb") as f:
        for _ in range(SIZE // MiB):
            f.write(os.urandom(MiB))
    staging = os.path.join(SCRATCH, "staging")
    port = free_port()
    server = subprocess.Popen(
        [BIN, "--bind", "127.0.0.1", "--port", str(port), "--staging", staging, "--reserve", "0",
         "--no-qr", "--json"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    sys.exit("browserdrop did not listen")
                time.sleep(0.05)
        whole, resumed, extras = [], [], []
        for rep in range(REPS):
            for kind in ("whole", "resumed"):
                subprocess.run(["sync"], check=False)
                name = "%s-%d.bin" % (kind, rep)
                seconds, status, extra = upload(port, source, name,
                                                None if kind == "whole" else SIZE // 2)
                assert status == 201, (kind, status)
                folder = [n for n in os.listdir(staging) if n.startswith("session-")][0]
                stored = os.path.join(staging, folder, name)
                assert filecmp.cmp(stored, source, shallow=False), "%s differs" % name
                os.unlink(stored)
                (whole if kind == "whole" else resumed).append(seconds)
                if extra:
                    extras.append(extra)
        def fmt(values):
            return "%.2f s (%.2f-%.2f)" % (statistics.median(values), min(values), max(values))
        print("| %d MiB, %d rounds | median (min-max) |" % (SIZE // MiB, REPS))
        print("| --- | --- |")
        print("| whole | %s |" % fmt(whole))
        print("| cut at 50%%, HEAD, PATCH | %s |" % fmt(resumed))
        print("| ratio | %.3f |" % (statistics.median(resumed) / statistics.median(whole)))
        print("| HEAD round trip | %.1f ms median |" % (statistics.median(e[0] for e in extras) * 1000))
        print("| PATCH connect + head | %.2f ms median |" % (statistics.median(e[1] for e in extras) * 1000))
        print("| offset kept at the cut | %s |" % sorted({e[2] for e in extras}))
    finally:
        server.send_signal(signal.SIGKILL)
        server.wait(timeout=30)
        shutil.rmtree(SCRATCH, ignore_errors=True)


if __name__ == "__main__":
    main()

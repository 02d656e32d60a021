"""Figures for --name (issue 19), on the LAN of lan.py: how long after `listening` avahi-daemon
confirms the name, the kiosk's resident memory and threads with and without --name, and whether
the next batch's session answers config.json with the name at once. Not a test: it prints.

    sudo .venv/bin/python Tests/Operations/measure_name.py .build/release/browserdrop [RUNS]
"""

import json
import pathlib
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from lan import config_json, lan_pair  # noqa: E402

BINARY = str(pathlib.Path(sys.argv[1]).resolve())
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 5


def start(host, folder, name):
    command = [*host.enter(), BINARY, "--kiosk", "--json", "--port", "0", "--quiet-period", "0.3",
               "--staging", f"{folder}/staging", "--to", f"{folder}/dest"]
    if name:
        command += ["--name", name]
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=sys.stderr, text=True)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put((time.monotonic(), json.loads(l))) for l in process.stdout],
                     daemon=True).start()
    return process, lines


def wait(lines, predicate, timeout=30):
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        try:
            at, event = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        if predicate(event):
            return at, event
        seen.append(event)
    raise SystemExit(f"timed out; events: {seen}")


def status(pid):
    fields = dict(line.split(":", 1) for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines())
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["Threads"])


def stop(process):
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=60)


with lan_pair() as (a, b):
    delays = []
    for run in range(RUNS):
        with tempfile.TemporaryDirectory() as folder:
            process, lines = start(a, folder, "intake")
            listened, event = wait(lines, lambda e: e.get("event") == "listening")
            port = int(event["addresses"][0]["url"].rsplit(":", 1)[1].rstrip("/"))
            published, _ = wait(lines, lambda e: e.get("event") == "notice"
                                and e["message"].startswith("Advertised as"))
            delays.append(published - listened)
            if run == 0:
                time.sleep(2)  # idle: nothing arrives, the figures settle
                rss, threads = status(process.pid)
                print(f"--name intake: RSS {rss:.1f} MiB, {threads} threads")
                handed = 0
                for batch in range(5):
                    b.run("curl", "-sS", "-o", "/dev/null", "--data-binary", "x",
                          f"http://{a.address}:{port}/upload?path={batch}.txt")
                    wait(lines, lambda e: e.get("event") == "forwarded")
                    deadline = time.monotonic() + 10
                    while True:
                        try:
                            handed += config_json(b, a.address, port).get("localName") == "intake.local"
                            break
                        except subprocess.CalledProcessError:
                            if time.monotonic() > deadline:
                                raise
                            time.sleep(0.05)
                print(f"next batch's first config.json with the name: {handed} of 5")
            stop(process)
    with tempfile.TemporaryDirectory() as folder:
        process, lines = start(a, folder, None)
        wait(lines, lambda e: e.get("event") == "listening")
        time.sleep(2)
        rss, threads = status(process.pid)
        print(f"no --name: RSS {rss:.1f} MiB, {threads} threads")
        stop(process)
    delays.sort()
    print("listening -> published, s: " + ", ".join(f"{d:.3f}" for d in delays))

#!/usr/bin/env python3
"""BrowserDrop's own ingest benchmark: W1 (one large upload), W2 (many small uploads, a new
connection each, a few in flight) and W3 (many large uploads at once) against the built
`browserdrop` command on 127.0.0.1, with durability on and off, next to the disk's own limits
(dd with and without fdatasync) measured in the same run.

    Benchmarks/run.sh                 # builds release, runs everything, prints a markdown table
    REPS=1 W1_MB=256 Benchmarks/run.sh   # quicker
    WORKLOADS=W2 Benchmarks/run.sh       # some workloads only
    VARIANTS=durable,fast WORKLOADS=W2 Benchmarks/run.sh   # some variants only

W2 also measures the disk's own limits for the same files, with the same parallelism and client
threads, rotated among the variants of each round: an open/write/close loop; an
open/write/fdatasync/close loop (the harness's durable limit row, which orders nothing: name and
data reach the disk in one flush); and the order a durable upload keeps (data flushed, then
linked, then the folder flushed with group commit), without the server.

Figures are medians over REPS rounds (min–max in brackets). Every measured file is checked
afterwards (size always, sha256 for W1 and a sample of the others). Only 127.0.0.1 is contacted;
every server is started here and stopped by its PID; every load is bounded in count and time.
"""

import hashlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MiB = 1 << 20
GiB = 1 << 30
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

CFG = {
    "W1_MB": int(os.environ.get("W1_MB", 1024)),
    "W2_COUNT": int(os.environ.get("W2_COUNT", 2000)),
    "W2_KB": int(os.environ.get("W2_KB", 16)),
    "W2_PAR": int(os.environ.get("W2_PAR", 3)),
    "W3_COUNT": int(os.environ.get("W3_COUNT", 32)),
    "W3_MB": int(os.environ.get("W3_MB", 32)),
    "REPS": int(os.environ.get("REPS", 3)),
    "SCRATCH": os.environ.get("SCRATCH", "/tmp/browserdrop-bench"),
    "SETTLE_S": float(os.environ.get("SETTLE_S", 2)),
    "INODE_COOLDOWN_S": float(os.environ.get("INODE_COOLDOWN_S", 35)),
    "SMOKE": os.environ.get("SMOKE", "") == "1",
    # Which workloads, in this order (W2 last: its files stay until the end, see measure).
    "WORKLOADS": [w.strip() for w in os.environ.get("WORKLOADS", "W1,W3,W2").split(",") if w.strip()],
    # Which variants: defaults, sniff (durability off), durable (sniffing off), fast (both off).
    "VARIANTS": [v.strip() for v in os.environ.get("VARIANTS", "defaults,sniff,durable,fast").split(",")
                 if v.strip()],
}
if CFG["SMOKE"]:  # a few seconds: proves the benchmark runs, asserts nothing about speed
    CFG.update(W1_MB=64, W2_COUNT=200, W3_COUNT=4, W3_MB=8, REPS=1, SETTLE_S=0, INODE_COOLDOWN_S=0)


def log(*parts):
    print("[bench %s]" % time.strftime("%H:%M:%S"), *parts, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def make_file(path, size):
    if os.path.exists(path) and os.path.getsize(path) == size:
        return
    log("generating", path)
    with open(path + ".tmp", "wb") as out:
        left = size
        while left:
            chunk = min(16 * MiB, left)
            out.write(os.urandom(chunk))
            left -= chunk
    os.rename(path + ".tmp", path)


def sha256(path, limit=None):
    digest = hashlib.sha256()
    with open(path, "rb") as source:
        left = limit
        while True:
            chunk = source.read(8 * MiB if left is None else min(8 * MiB, left))
            if not chunk:
                break
            digest.update(chunk)
            if left is not None:
                left -= len(chunk)
                if left == 0:
                    break
    return digest.hexdigest()


def build_client(source, path):
    """Compiles Benchmarks/SOURCE (a load client: loadclient.c, variedclient.c) to PATH; returns
    PATH."""
    subprocess.run(["cc", "-O2", "-pthread", "-o", path, os.path.join(ROOT, "Benchmarks", source)],
                   check=True)
    return path


def curl_upload(port, path):
    """POSTs the file PATH as w1.bin to the server on 127.0.0.1:PORT with curl (bounded: 600 s);
    curl's CompletedProcess, whose stdout is the reply's HTTP status."""
    url = "http://127.0.0.1:%d/upload?path=w1.bin" % port
    return subprocess.run(
        ["curl", "-sS", "--max-time", "600", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST",
         "-H", "Origin: http://127.0.0.1:%d" % port, "-T", path, url],
        capture_output=True, text=True, timeout=660)


def process_cpu(pid):
    """utime + stime of the process and its reaped children, in seconds."""
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / CLOCK_TICKS


def peak_rss_mib(pid):
    status = dict(line.split(":", 1) for line in open("/proc/%d/status" % pid) if ":" in line)
    return int(status["VmHWM"].split()[0]) / 1024, int(status["RssAnon"].split()[0]) / 1024


class Server:
    """One `browserdrop` process on 127.0.0.1 with its own staging root."""

    def __init__(self, binary, staging, durability, sniffing):
        self.port = free_port()
        self.staging = staging
        arguments = [binary, "--bind", "127.0.0.1", "--port", str(self.port), "--staging", staging,
                     "--reserve", "0", "--no-qr", "--json", "--durability", "on" if durability else "off"]
        if not sniffing:
            arguments += ["--content-check", "off"]
        self.process = subprocess.Popen(arguments, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.process.poll() is not None:
                    raise RuntimeError("browserdrop exited: %s" % self.process.stderr.read().decode())
                time.sleep(0.05)
        raise RuntimeError("browserdrop did not listen within 30 s")

    def session_folder(self):
        names = [n for n in os.listdir(self.staging) if n.startswith("session-")]
        return os.path.join(self.staging, names[0]) if names else None

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)  # the measurement is over; nothing to forward
        self.process.wait(timeout=30)


def settle():
    subprocess.run(["sync"], check=False)
    time.sleep(CFG["SETTLE_S"])


def measure(binary, workload, durability, sniffing, data, loadclient, staging):
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(staging)
    settle()
    server = Server(binary, staging, durability, sniffing)
    try:
        cpu_before = process_cpu(server.process.pid)
        started = time.monotonic()
        if workload == "W1":
            result = curl_upload(server.port, data["W1"])
            ok = result.stdout.strip() == "201"
            count, size = 1, CFG["W1_MB"] * MiB
        else:
            count = CFG["W2_COUNT"] if workload == "W2" else CFG["W3_COUNT"]
            size = CFG["W2_KB"] * 1024 if workload == "W2" else CFG["W3_MB"] * MiB
            parallel = CFG["W2_PAR"] if workload == "W2" else CFG["W3_COUNT"]
            arguments = [loadclient, str(server.port), str(count), str(size), str(parallel), "f"]
            if workload == "W3":
                arguments.append(data["W3"])
            result = subprocess.run(arguments, capture_output=True, text=True, timeout=300)
            report = json.loads(result.stdout or "{}")
            ok = report.get("ok") == count
        elapsed = time.monotonic() - started
        cpu = process_cpu(server.process.pid) - cpu_before
        peak, anon = peak_rss_mib(server.process.pid)
        folder = server.session_folder()
        stored = sorted(os.listdir(folder)) if folder else []
        if ok and len(stored) != count:
            ok = False
        if ok:
            for name in stored[:: max(1, len(stored) // 8)]:
                if os.path.getsize(os.path.join(folder, name)) != size:
                    ok = False
            if workload == "W1" and sha256(os.path.join(folder, stored[0])) != data["W1_sha256"]:
                ok = False
            if workload == "W3" and sha256(os.path.join(folder, stored[0])) != data["W3_sha256"]:
                ok = False
        return {"ok": ok, "elapsed": elapsed, "cpu": cpu, "peak": peak, "anon": anon,
                "bytes": count * size, "files": count}
    finally:
        server.stop()
        # W2's small files stay until every W2 measurement is done: this ext4 has no journal,
        # and its inode allocator skips inodes freed in the last minutes (`recently_deleted`),
        # so deleting them here would slow the next measurement's every create.
        if workload != "W2":
            shutil.rmtree(staging, ignore_errors=True)


def dd(target, data, sync):
    settle()
    arguments = ["dd", "if=" + data, "of=" + target, "bs=1M"] + (["conv=fdatasync"] if sync else [])
    started = time.monotonic()
    subprocess.run(arguments, check=True, capture_output=True, timeout=600)
    elapsed = time.monotonic() - started
    os.remove(target)
    return elapsed


def write_loop(loadclient, folder, mode):
    """The disk alone for W2's files: PAR threads; `mode` is loadclient's local, local-sync or
    local-ordered."""
    os.makedirs(folder)
    settle()
    mode += ":"
    arguments = [loadclient, mode + folder, str(CFG["W2_COUNT"]), str(CFG["W2_KB"] * 1024),
                 str(CFG["W2_PAR"]), "f"]
    result = subprocess.run(arguments, capture_output=True, text=True, timeout=300)
    report = json.loads(result.stdout or "{}")
    ok = report.get("ok") == CFG["W2_COUNT"] and len(os.listdir(folder)) == CFG["W2_COUNT"]
    return {"ok": ok, "elapsed": report.get("elapsed", 1), "cpu": 0, "peak": 0, "anon": 0,
            "bytes": CFG["W2_COUNT"] * CFG["W2_KB"] * 1024, "files": CFG["W2_COUNT"]}


def median_text(values, fmt):
    values = sorted(values)
    middle = statistics.median(values)
    if len(values) == 1:
        return fmt % middle
    return (fmt % middle) + " (" + (fmt % values[0]) + "–" + (fmt % values[-1]) + ")"


def main():
    unknown = [w for w in CFG["WORKLOADS"] if w not in ("W1", "W2", "W3")]
    if unknown:
        sys.exit("bench.py: WORKLOADS: unknown workload %s (choose from W1, W2, W3)" % ", ".join(unknown))
    binary = os.environ.get("BROWSERDROP", os.path.join(ROOT, ".build/release/browserdrop"))
    os.makedirs(CFG["SCRATCH"], exist_ok=True)
    loadclient = build_client("loadclient.c", os.path.join(CFG["SCRATCH"], "loadclient"))
    data = {"W1": os.path.join(CFG["SCRATCH"], "w1-%d.bin" % CFG["W1_MB"]),
            "W3": os.path.join(CFG["SCRATCH"], "w3-%d.bin" % CFG["W3_MB"])}
    make_file(data["W1"], CFG["W1_MB"] * MiB)
    make_file(data["W3"], CFG["W3_MB"] * MiB)
    data["W1_sha256"] = sha256(data["W1"])
    data["W3_sha256"] = sha256(data["W3"])

    known = {"defaults": ("durability on, sniffing on (the defaults)", True, True),
             "sniff": ("durability off, sniffing on", False, True),
             "durable": ("durability on, sniffing off", True, False),
             "fast": ("durability off, sniffing off", False, False)}
    unknown = [v for v in CFG["VARIANTS"] if v not in known]
    if unknown:
        sys.exit("bench.py: VARIANTS: unknown variant %s (choose from %s)" % (", ".join(unknown), ", ".join(known)))
    variants = [known[v] for v in CFG["VARIANTS"]]
    results = {}
    disk = {"dd": [], "dd fdatasync": []}
    kept = []
    for workload in CFG["WORKLOADS"]:
        if workload == "W2" and workload != CFG["WORKLOADS"][0]:
            # Let the inodes W1 and W3 freed age out first (see measure).
            time.sleep(CFG["INODE_COOLDOWN_S"])
        for round_number in range(CFG["REPS"]):
            log(workload, "round", round_number + 1, "of", CFG["REPS"])
            # The virtual disk slows down after each GiB written: rotate which variant goes first,
            # with W1's two dd runs (the disk's own limits) among them, so none always meets a
            # fresh disk.
            steps = [("server",) + variant for variant in variants]
            if workload == "W1":
                steps += [("dd", "dd", False, False), ("dd", "dd fdatasync", True, False)]
            if workload == "W2":
                steps += [("loop", "disk: open/write/close loop", "local", False),
                          ("loop", "disk: open/write/fdatasync/close loop", "local-sync", False),
                          ("loop", "disk: fdatasync, link, folder fsync (grouped)", "local-ordered", False)]
            shift = round_number % len(steps)
            for kind, name, durability, sniffing in steps[shift:] + steps[:shift]:
                if kind == "dd":  # the disk alone; `durability` is conv=fdatasync
                    disk[name].append(dd(os.path.join(CFG["SCRATCH"], "dd.bin"), data["W1"], durability))
                    log(workload, name, "%.3f s" % disk[name][-1])
                    continue
                if kind == "loop":  # W2's files without the network; `durability` is the mode
                    folder = os.path.join(CFG["SCRATCH"], "loop-%d" % len(kept))
                    kept.append(folder)
                    result = write_loop(loadclient, folder, durability)
                    log(workload, name, json.dumps(result))
                    results.setdefault((workload, name), []).append(result)
                    continue
                staging = os.path.join(CFG["SCRATCH"], "staging-%d" % len(kept))
                kept.append(staging)
                result = measure(binary, workload, durability, sniffing, data, loadclient, staging)
                log(workload, name, json.dumps(result))
                results.setdefault((workload, name), []).append(result)
    for staging in kept:
        shutil.rmtree(staging, ignore_errors=True)

    w1_bytes = CFG["W1_MB"] * MiB
    lines = [
        "| workload | variant | rate | server CPU | peak RSS (anon) | checked |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for label, runs in disk.items():
        if not runs:
            continue
        lines.append("| disk | %s, %d MiB | %s MB/s | | | |" % (
            label, CFG["W1_MB"], median_text([w1_bytes / t / 1e6 for t in runs], "%.0f")))
    for (workload, name), runs in results.items():
        good = [r for r in runs if r["ok"]]
        checked = "%d/%d ok" % (len(good), len(runs))
        if not good:
            lines.append("| %s | %s | FAIL | | | %s |" % (workload, name, checked))
            continue
        if workload == "W2":
            rate = median_text([r["files"] / r["elapsed"] for r in good], "%.0f") + " files/s"
            cpu = median_text([r["cpu"] / r["files"] * 1e6 for r in good], "%.0f") + " µs/file"
            if name.startswith("disk:"):
                cpu = ""
        else:
            rate = median_text([r["bytes"] / r["elapsed"] / 1e6 for r in good], "%.0f") + " MB/s"
            cpu = median_text([r["cpu"] / (r["bytes"] / GiB) for r in good], "%.2f") + " s/GiB"
        peak = median_text([r["peak"] for r in good], "%.0f") + " MiB (" + median_text(
            [r["anon"] for r in good], "%.1f") + ")"
        if name.startswith("disk:"):
            peak = ""
        lines.append("| %s | %s | %s | %s | %s | %s |" % (workload, name, rate, cpu, peak, checked))
    table = "\n".join(lines)
    print(table)
    failed = any(not r["ok"] for runs in results.values() for r in runs)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

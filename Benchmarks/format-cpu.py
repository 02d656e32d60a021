#!/usr/bin/env python3
"""Server CPU per upload of real files (known formats), for two builds of browserdrop in turn.

    python3 Benchmarks/format-cpu.py OLD_BINARY NEW_BINARY [FILE...]

For each FILE (default: a few binary files of Tests/Fixtures/corpus), COUNT uploads of that file
(Benchmarks/loadclient.c, PAR in flight, a connection each) with sniffing on and durability off,
staging on a tmpfs (TMPFS), to each binary in turn, ROUNDS rounds. W2 measures random bodies, which
libmagic walks its whole database for; a known format stops libmagic's walk at its own rule, so
its sniff costs what it costs differently. Reports the median user + system CPU per upload and
the new/old ratio. Only 127.0.0.1 is contacted; every run is bounded.
"""
import os, shutil, statistics, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (its Server: one browserdrop on 127.0.0.1, waited for, killed by PID)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COUNT = int(os.environ.get("COUNT", 2000))
PAR = int(os.environ.get("PAR", 3))
ROUNDS = int(os.environ.get("ROUNDS", 3))
TMPFS = os.environ.get("TMPFS", "/dev/shm")
CORPUS = os.path.join(ROOT, "Tests/Fixtures/corpus")
FILES = ["edit-copy.png", "frame.gif", "clip.mp4", "notes.zip", "spec-start.pdf", "tone.flac"]
TICKS = os.sysconf("SC_CLK_TCK")


def cpu(pid):
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def run(binary, path, loadclient):
    staging = tempfile.mkdtemp(prefix="bd-format-cpu-", dir=TMPFS)
    server = bench.Server(binary, staging, False, True)
    try:
        before = cpu(server.process.pid)
        result = subprocess.run(
            [loadclient, str(server.port), str(COUNT), str(os.path.getsize(path)), str(PAR), "f", path],
            capture_output=True, text=True, timeout=300)
        after = cpu(server.process.pid)
        if '"ok": %d,' % COUNT not in result.stdout:
            raise RuntimeError("load failed: %s %s" % (result.stdout, result.stderr))
        return (after - before) / COUNT * 1e6
    finally:
        server.stop()
        shutil.rmtree(staging, ignore_errors=True)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    binaries = {"old": sys.argv[1], "new": sys.argv[2]}
    files = sys.argv[3:] or [os.path.join(CORPUS, name) for name in FILES]
    loadclient = os.path.join(tempfile.gettempdir(), "bd-format-cpu-loadclient")
    subprocess.run(["cc", "-O2", "-pthread", "-o", loadclient,
                    os.path.join(ROOT, "Benchmarks/loadclient.c")], check=True)
    samples = {}
    for round_ in range(ROUNDS):
        for path in files:
            for name, binary in binaries.items():
                value = run(binary, path, loadclient)
                samples.setdefault((path, name), []).append(value)
                print("round %d %s %s: %.0f µs per upload" % (round_ + 1, os.path.basename(path), name, value),
                      flush=True)
    print("\n| file | bytes | old µs/upload | new µs/upload | new/old |")
    print("| --- | --- | --- | --- | --- |")
    for path in files:
        old = statistics.median(samples[(path, "old")])
        new = statistics.median(samples[(path, "new")])
        print("| %s | %d | %.0f | %.0f | %.2f× |" % (os.path.basename(path), os.path.getsize(path), old, new,
                                                   new / old))


if __name__ == "__main__":
    main()

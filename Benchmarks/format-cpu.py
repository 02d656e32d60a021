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
import os, statistics, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (build_client)
import benchlib  # noqa: E402  (the server on a fresh staging folder, the load, CPU from /proc)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COUNT = int(os.environ.get("COUNT", 2000))
PAR = int(os.environ.get("PAR", 3))
ROUNDS = int(os.environ.get("ROUNDS", 3))
TMPFS = os.environ.get("TMPFS", "/dev/shm")
CORPUS = os.path.join(ROOT, "Tests/Fixtures/corpus")
FILES = ["edit-copy.png", "frame.gif", "clip.mp4", "notes.zip", "spec-start.pdf", "tone.flac"]


def run(binary, path, loadclient):
    with benchlib.server(binary, TMPFS, "bd-format-cpu-", False, True) as server:
        before = benchlib.cpu_total(server.process.pid)
        result = benchlib.load(
            [loadclient, str(server.port), str(COUNT), str(os.path.getsize(path)), str(PAR), "f", path])
        after = benchlib.cpu_total(server.process.pid)
        benchlib.check(result, COUNT)
        return (after - before) / COUNT * 1e6


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    binaries = {"old": sys.argv[1], "new": sys.argv[2]}
    files = sys.argv[3:] or [os.path.join(CORPUS, name) for name in FILES]
    loadclient = bench.build_client(
        "loadclient.c", os.path.join(tempfile.gettempdir(), "bd-format-cpu-loadclient"))
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
        # A small COUNT can measure no CPU tick at all for a file: no ratio then.
        ratio = "%.2f×" % (new / old) if old > 0 else "n/a (no CPU tick measured; raise COUNT)"
        print("| %s | %d | %.0f | %.0f | %s |" % (os.path.basename(path), os.path.getsize(path), old, new, ratio))


if __name__ == "__main__":
    main()

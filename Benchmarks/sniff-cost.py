#!/usr/bin/env python3
"""What content sniffing costs the server per small file: W2-like loads (COUNT random bodies of
16 KiB, 3 in flight, a connection each, from Benchmarks/loadclient.c) against one or more
`browserdrop` binaries, with sniffing on and off, durability on and off. The figure is the
server process's CPU time (user + system, from /proc/PID/stat) per file.

    Benchmarks/sniff-cost.py OLD_BINARY NEW_BINARY      (ROUNDS=5, COUNT=1000)

Every round runs each binary and variant once, in an order that rotates from round to round.
On a shared machine other processes only add to a run's CPU time (cache and core contention),
so the table gives the minimum over the rounds next to the median, and the ratio of sniffing
on to off for both. Only 127.0.0.1 is contacted; each server is started here and killed by its
PID; every load is bounded in count and time.
"""

import os
import shutil
import statistics
import subprocess
import sys
import json

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (Server, process_cpu, build_client)

ROUNDS = int(os.environ.get("ROUNDS", 5))
COUNT = int(os.environ.get("COUNT", 1000))
SCRATCH = os.environ.get("SCRATCH", "/tmp/browserdrop-sniff-cost")


def io_threads_cpu(pid):
    """CPU seconds of the server's blocking-pool threads (`bd-io-N`: libmagic, fdatasync)."""
    total = 0.0
    for task in os.listdir("/proc/%d/task" % pid):
        try:
            stat = open("/proc/%d/task/%s/stat" % (pid, task)).read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        if name.startswith("bd-io"):
            total += (int(fields[11]) + int(fields[12])) / bench.CLOCK_TICKS
    return total


def run_once(binary, durability, sniffing, loadclient, staging):

    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(staging)
    server = bench.Server(binary, staging, durability, sniffing)
    try:
        before = bench.process_cpu(server.process.pid)
        io_before = io_threads_cpu(server.process.pid)
        result = subprocess.run([loadclient, str(server.port), str(COUNT), str(16 * 1024), "3", "f"],
                                capture_output=True, text=True, timeout=300)
        cpu = bench.process_cpu(server.process.pid) - before
        io = io_threads_cpu(server.process.pid) - io_before
        report = json.loads(result.stdout or "{}")
        if report.get("ok") != COUNT:
            raise RuntimeError("only %s of %d uploads stored" % (report.get("ok"), COUNT))
        return cpu / COUNT * 1e6, io / COUNT * 1e6
    finally:
        server.stop()


def main():
    binaries = sys.argv[1:]
    if not binaries:
        sys.exit(__doc__)
    os.makedirs(SCRATCH, exist_ok=True)
    loadclient = bench.build_client("loadclient.c", os.path.join(SCRATCH, "loadclient"))
    names = {b: b for b in binaries}
    unit = "µs/file"
    steps = [(b, d, s) for b in binaries for d in (True, False) for s in (True, False)]
    samples = {step: [] for step in steps}
    print("load average at start:", open("/proc/loadavg").read().split()[:3], file=sys.stderr)
    for round_number in range(ROUNDS):
        shift = round_number % len(steps)
        for step in steps[shift:] + steps[:shift]:
            binary, durability, sniffing = step
            staging = os.path.join(SCRATCH, "staging-%d" % len(samples[step]))
            samples[step].append(run_once(binary, durability, sniffing, loadclient, staging))
        print("round", round_number + 1, "done; load", open("/proc/loadavg").read().split()[:3],
              file=sys.stderr)
    saved_scratch = SCRATCH
    shutil.rmtree(saved_scratch, ignore_errors=True)
    print("| binary | durability | sniffing | min %s | median %s | on/off (min) | on/off (median) "
          "| bd-io threads, median %s |" % (unit, unit, unit))
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for binary in binaries:
        for durability in (True, False):
            on = [cpu for cpu, _ in samples[(binary, durability, True)]]
            off = [cpu for cpu, _ in samples[(binary, durability, False)]]
            for sniffing, values in ((True, on), (False, off)):
                io = statistics.median(io for _, io in samples[(binary, durability, sniffing)])
                ratio_min = "%.2f" % (min(on) / min(off)) if sniffing else ""
                ratio_median = "%.2f" % (statistics.median(on) / statistics.median(off)) if sniffing else ""
                print("| %s | %s | %s | %.0f | %.0f | %s | %s | %.0f |" % (
                    names[binary], "on" if durability else "off", "on" if sniffing else "off", min(values),
                    statistics.median(values), ratio_min, ratio_median, io))
    print("load average at end:", open("/proc/loadavg").read().split()[:3], file=sys.stderr)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Server CPU per small upload for two builds of browserdrop, in turn, on a tmpfs staging folder.

    python3 Benchmarks/cpu-ab.py OLD_BINARY NEW_BINARY

W2's shape (COUNT uploads of KB KiB random bytes, PAR in flight, a connection each, by
Benchmarks/loadclient.c) for each variant (durability, sniffing), ROUNDS rounds, each round
running both binaries one after the other. The staging folder is on tmpfs (/dev/shm): the disk,
and ext4's inode allocation after a run that deleted thousands of files, make W2's time and CPU
vary several-fold between runs on these shared machines, and that noise hides any change of a few
per cent in the server's own work. Reports the median user and system CPU per file of each
binary and variant, and their ratio. Only 127.0.0.1 is contacted; every run is bounded.
"""
import os, statistics, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (build_client)
import benchlib  # noqa: E402  (the server on a fresh staging folder, the load, CPU from /proc)

COUNT = int(os.environ.get("COUNT", 2000))
KB = int(os.environ.get("KB", 16))
PAR = int(os.environ.get("PAR", 3))
ROUNDS = int(os.environ.get("ROUNDS", 5))
TMPFS = os.environ.get("TMPFS", "/dev/shm")
VARIANTS = [("on", "on"), ("off", "on"), ("on", "off"), ("off", "off")]


def run(binary, durability, sniffing, loadclient):
    with benchlib.server(binary, TMPFS, "bd-cpu-ab-", durability == "on", sniffing == "on") as server:
        user0, system0 = benchlib.cpu(server.process.pid)
        result = benchlib.load([loadclient, str(server.port), str(COUNT), str(KB * 1024), str(PAR), "f"])
        user1, system1 = benchlib.cpu(server.process.pid)
        benchlib.check(result, COUNT)
        return (user1 - user0) / COUNT * 1e6, (system1 - system0) / COUNT * 1e6


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    binaries = {"old": sys.argv[1], "new": sys.argv[2]}
    loadclient = bench.build_client("loadclient.c",
                                    os.path.join(tempfile.gettempdir(), "bd-cpu-ab-loadclient"))
    samples = {}
    for round_ in range(ROUNDS):
        for variant in VARIANTS:
            for name, binary in binaries.items():
                user, system = run(binary, *variant, loadclient)
                samples.setdefault((variant, name), []).append((user, system))
                print("round %d durability %-3s sniffing %-3s %s: user %4.0f µs, system %4.0f µs per file"
                      % (round_ + 1, variant[0], variant[1], name, user, system), flush=True)
    print("\n| durability | sniffing | old user+sys µs/file | new user+sys µs/file | new/old |")
    print("| --- | --- | --- | --- | --- |")
    for variant in VARIANTS:
        medians = {}
        for name in binaries:
            values = samples[(variant, name)]
            medians[name] = (statistics.median(u for u, _ in values), statistics.median(s for _, s in values))
        old, new = medians["old"], medians["new"]
        print("| %s | %s | %.0f + %.0f | %.0f + %.0f | %.2f× |" % (
            variant[0], variant[1], old[0], old[1], new[0], new[1], (new[0] + new[1]) / (old[0] + old[1])))


if __name__ == "__main__":
    main()

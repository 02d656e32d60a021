#!/usr/bin/env python3
"""Peak RSS and CPU per file of W2 with a different random body for every upload, as the peers
harness sends it, for one or more builds of browserdrop in turn.

    python3 Benchmarks/rss-w2.py BINARY [BINARY...]

Each round runs every binary once with the defaults (durability and sniffing on, or what
DURABILITY / SNIFFING say): a fresh server, COUNT uploads of KB KiB (Benchmarks/variedclient.c,
seeded with SEED so every binary gets the same bodies), PAR in flight, a connection each. Reports
the server's VmHWM and VmRSS after the load, the resident size of each kind of mapping at the
sample where VmRSS peaked (SAMPLE=1 reads /proc/PID/smaps every 50 ms during the load, which costs
the server some CPU; SAMPLE=0 measures CPU cleanly), and the server's user + system CPU per file.
STAGING is the parent of the staging folders (default /tmp: on this VM a disk, as in the harness).

PRELOAD=1 runs the harness's order on the same server first: W1 (one PRELOAD_W1_MB upload with
curl) and W3 (32 uploads of 32 MiB at once, Benchmarks/loadclient.c), then resets VmHWM
(`echo 5 > /proc/PID/clear_refs`, as the harness does before each measurement) and runs W2.
Only 127.0.0.1 is contacted; every server is started here and stopped by its PID.
"""
import os, statistics, subprocess, sys, tempfile, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (build_client, make_file, MiB, curl_upload)
import benchlib  # noqa: E402  (the server on a fresh staging folder, the load, CPU from /proc)

COUNT = int(os.environ.get("COUNT", 2000))
KB = int(os.environ.get("KB", 16))
PAR = int(os.environ.get("PAR", 3))
ROUNDS = int(os.environ.get("ROUNDS", 3))
SEED = os.environ.get("SEED", "1")
STAGING = os.environ.get("STAGING", "/tmp")
DURABILITY = os.environ.get("DURABILITY", "on") == "on"
SNIFFING = os.environ.get("SNIFFING", "on") == "on"
SAMPLE = os.environ.get("SAMPLE", "1") == "1"
PRELOAD = os.environ.get("PRELOAD", "0") == "1"
PRELOAD_W1_MB = int(os.environ.get("PRELOAD_W1_MB", 1024))
DATA = os.environ.get("DATA", "/tmp/bd-rss-w2-data")


def status(pid):
    values = {}
    for line in open("/proc/%d/status" % pid):
        key, _, rest = line.partition(":")
        if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
            values[key] = int(rest.split()[0])
    return values


def mappings(pid):
    """Resident KiB by mapping kind: magic.mgc, heap and anonymous, libraries, the rest."""
    kinds, current = {}, None
    for line in open("/proc/%d/smaps" % pid):
        first = line.split()
        if "-" in first[0] and len(first[0]) > 8 and ":" not in first[0]:
            name = first[5] if len(first) > 5 else ""
            if name.endswith("magic.mgc"):
                current = "magic.mgc"
            elif name in ("", "[heap]") or name.startswith("[anon"):
                current = "anonymous"
            elif ".so" in name:
                current = "libraries"
            else:
                current = "other " + os.path.basename(name)
        elif first[0] == "Rss:":
            kinds[current] = kinds.get(current, 0) + int(first[1])
    return kinds


def preload(server, loadclient):
    """The harness's W1 and W3 on `server`, before its W2; their files are deleted after."""
    w1 = os.path.join(DATA, "w1.bin")
    w3 = os.path.join(DATA, "w3.bin")
    bench.make_file(w1, PRELOAD_W1_MB * bench.MiB)
    bench.make_file(w3, 32 * bench.MiB)
    result = bench.curl_upload(server.port, w1)
    if result.stdout.strip() != "201":
        raise RuntimeError("W1 failed: %s %s" % (result.stdout, result.stderr))
    result = subprocess.run([loadclient, str(server.port), "32", str(32 * bench.MiB), "32", "w3-", w3],
                            capture_output=True, text=True, timeout=600)
    if '"ok": 32,' not in result.stdout:
        raise RuntimeError("W3 failed: %s %s" % (result.stdout, result.stderr))
    folder = server.session_folder()
    for name in os.listdir(folder):
        if name.startswith("w1") or name.startswith("w3-"):
            os.remove(os.path.join(folder, name))
    with open("/proc/%d/clear_refs" % server.process.pid, "w") as f:
        f.write("5")


def run(binary, client, round_, loadclient):
    with benchlib.server(binary, STAGING, "bd-rss-w2-", DURABILITY, SNIFFING) as server:
        pid = server.process.pid
        peak = {"rss": 0, "kinds": {}}
        done = threading.Event()

        def sample():
            while not done.wait(0.05):
                try:
                    rss = status(pid)["VmRSS"]
                    if rss > peak["rss"]:
                        peak.update(rss=rss, kinds=mappings(pid))
                except (OSError, KeyError):
                    return

        time.sleep(0.5)
        if PRELOAD:
            preload(server, loadclient)
            time.sleep(1)
        start = status(pid)
        sampler = threading.Thread(target=sample)
        if SAMPLE:
            sampler.start()
        cpu0 = benchlib.cpu_total(pid)
        result = benchlib.load([client, str(server.port), str(COUNT), str(KB * 1024), str(PAR), "f", SEED])
        cpu1 = benchlib.cpu_total(pid)
        done.set()
        if SAMPLE:
            sampler.join()
        benchlib.check(result, COUNT)
        end = status(pid)
        return {"start_rss": start["VmRSS"], "hwm": end["VmHWM"], "rss": end["VmRSS"],
                "anon": end["RssAnon"], "file": end["RssFile"], "cpu_us": (cpu1 - cpu0) / COUNT * 1e6,
                "kinds": peak["kinds"] or mappings(pid)}


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    client = bench.build_client("variedclient.c",
                                os.path.join(tempfile.gettempdir(), "bd-rss-w2-variedclient"))
    loadclient = bench.build_client("loadclient.c",
                                    os.path.join(tempfile.gettempdir(), "bd-rss-w2-loadclient"))
    os.makedirs(DATA, exist_ok=True)
    results = {}
    for round_ in range(ROUNDS):
        for binary in sys.argv[1:]:
            r = run(binary, client, round_, loadclient)
            results.setdefault(binary, []).append(r)
            kinds = ", ".join("%s %.1f" % (k, v / 1024) for k, v in sorted(r["kinds"].items()))
            print("round %d %s: VmHWM %.1f MiB, VmRSS %.1f (start %.1f; anon %.1f, file %.1f), "
                  "%.0f µs CPU/file; at the peak sample, MiB: %s"
                  % (round_ + 1, binary, r["hwm"] / 1024, r["rss"] / 1024, r["start_rss"] / 1024,
                     r["anon"] / 1024, r["file"] / 1024, r["cpu_us"], kinds), flush=True)
    print("\n| binary | VmHWM MiB, median (min–max) | CPU µs/file, median |")
    print("| --- | --- | --- |")
    for binary, rs in results.items():
        hwm = [r["hwm"] / 1024 for r in rs]
        print("| %s | %.1f (%.1f–%.1f) | %.0f |" % (binary, statistics.median(hwm), min(hwm), max(hwm),
                                                  statistics.median(r["cpu_us"] for r in rs)))


if __name__ == "__main__":
    main()

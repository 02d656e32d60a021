"""What the A/B measuring tools (cpu-ab.py, format-cpu.py, rss-w2.py) share: one `browserdrop`
on 127.0.0.1 (bench.Server) with a fresh staging folder of its own, a bounded run of a load client
and the check that every upload landed, and the server's CPU time from /proc/PID/stat. The lower
helpers (bench.Server, bench.build_client, bench.make_file, ...) are bench.py's.
"""
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (its Server: one browserdrop on 127.0.0.1, waited for, killed by PID)

@contextlib.contextmanager
def server(binary, parent, prefix, durability, sniffing):
    """A bench.Server on a new staging folder PREFIX* under PARENT; killed and the folder removed
    on leaving."""
    staging = tempfile.mkdtemp(prefix=prefix, dir=parent)
    started = bench.Server(binary, staging, durability, sniffing)
    try:
        yield started
    finally:
        started.stop()
        shutil.rmtree(staging, ignore_errors=True)


def load(arguments):
    """Runs a load client to its end (bounded: 300 s); its CompletedProcess, output as text."""
    return subprocess.run(arguments, capture_output=True, text=True, timeout=300)


def check(result, count):
    """Raises unless the load client's JSON line says all COUNT uploads got a 2xx."""
    if '"ok": %d,' % count not in result.stdout:
        raise RuntimeError("load failed: %s %s" % (result.stdout, result.stderr))


def _cpu_ticks(pid):
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])


def cpu(pid):
    """The user and the system CPU seconds of process PID so far (its threads, not its children)."""
    user, system = _cpu_ticks(pid)
    return user / bench.CLOCK_TICKS, system / bench.CLOCK_TICKS


def cpu_total(pid):
    """User + system CPU seconds of process PID so far (its threads, not its children)."""
    user, system = _cpu_ticks(pid)
    return (user + system) / bench.CLOCK_TICKS

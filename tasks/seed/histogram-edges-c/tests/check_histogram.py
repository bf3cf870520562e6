"""Verifier for /app/hist/histogram.c: exactly the counts of the reference bin scan, and at
least MIN_SPEEDUP times faster than it, measured here in the same container.

The agent's source is compiled and run only as `nobody` in its own folder with a clean
environment; every process of `nobody` is killed after each run. Speed is the wall time of whole
runs measured from here, out of the agent's reach; reference and agent runs alternate on the same
inputs and the medians of REPEATS runs are compared, so load slows both alike. Every timed run is
checked too.
"""
import os
import pwd
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

SRC = "/app/hist/histogram.c"
HERE = os.path.dirname(os.path.abspath(__file__))
AGENT = pwd.getpwnam("nobody")
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8"}
CFLAGS = ["-O3", "-std=c11"]
LIBS = ["-lm"]
# (values, bins): no values, one bin, values on every edge, many bins.
CASES = [(0, 5), (1, 1), (50, 1), (1000, 2), (3000, 7), (20000, 64), (50000, 999), (4000, 5000)]
SIZE, REPEATS, MIN_SPEEDUP = (500000, 1500), 5, 5.0


def end_agent_processes():
    """Kill every process of the unprivileged user until none is left."""
    for _ in range(50):
        pids = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/status") as f:
                        uid = next(int(x.split()[1]) for x in f if x.startswith("Uid:"))
                except (OSError, StopIteration, ValueError):
                    continue
                if uid == AGENT.pw_uid:
                    pids.append(int(entry))
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    raise SystemExit("FAIL: the agent's processes could not be ended")


def run(argv, cwd, agent, timeout, tries=3):
    """(wall seconds, stdout) of one run, or (None, error text). A run
    SIGKILLed from outside (seen under heavy load) is tried again, twice at most."""
    who = {"user": AGENT.pw_uid, "group": AGENT.pw_gid, "extra_groups": []} if agent else {}
    start = time.perf_counter()
    try:
        p = subprocess.run(argv, cwd=cwd, env=ENV, capture_output=True, timeout=timeout,
                           process_group=0, **who)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout}s"
    finally:
        if agent:
            end_agent_processes()
    elapsed = time.perf_counter() - start
    if p.returncode == -signal.SIGKILL and tries > 1:
        return run(argv, cwd, agent, timeout, tries - 1)
    if p.returncode != 0:
        return None, f"exit {p.returncode}: {p.stderr.decode(errors='replace')[-400:]}"
    return elapsed, p.stdout


def build_reference():
    d = tempfile.mkdtemp()
    os.chmod(d, 0o755)
    out = os.path.join(d, "bench")
    sources = [f"{HERE}/bench.c", f"{HERE}/ref_histogram.c"]
    subprocess.run(["gcc", *CFLAGS, "-o", out, *sources, *LIBS], check=True, env=ENV)
    return out


def build_agent():
    d = tempfile.mkdtemp()
    shutil.copy(SRC, f"{d}/histogram.c")
    shutil.copy(f"{HERE}/bench.c", f"{d}/bench.c")
    for name in (d, f"{d}/histogram.c", f"{d}/bench.c"):
        os.chown(name, AGENT.pw_uid, AGENT.pw_gid)
    took, err = run(["gcc", *CFLAGS, "-o", "bench", "bench.c", "histogram.c", *LIBS], d,
                    True, 120)
    return (f"{d}/bench", None) if took is not None else (None, err)


def same(got, want, label):
    if got == want:
        return True
    a, b = got.decode(errors="replace").split("\n"), want.decode().split("\n")
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            print(f"  {label}: bin {i} counts {x[:20]!r}, want {y!r}")
            return False
    print(f"  {label}: {len(a) - 1} bins written, want {len(b) - 1}")
    return False


def main():
    if not os.path.isfile(SRC):
        print(f"FAIL: {SRC} is missing")
        return False
    ref = build_reference()
    agent, err = build_agent()
    if agent is None:
        print(f"FAIL: {SRC} does not compile with gcc {' '.join(CFLAGS)}: {err}")
        return False
    cwd = os.path.dirname(agent)
    ok = True
    for seed, (n, bins) in enumerate(CASES, 1):
        _, want = run([ref, str(n), str(bins), str(seed)], cwd, False, 60)
        took, got = run([agent, str(n), str(bins), str(seed)], cwd, True, 60)
        label = f"{n} values, {bins} bins"
        good = took is not None and same(got, want, label)
        if took is None:
            print(f"  {label}: {got}")
        print(f"{'PASS' if good else 'FAIL'}: {label}")
        ok &= good
    if not ok:
        return False
    dims = [str(v) for v in SIZE]
    times = {"reference": [], "agent": []}
    for rep in range(REPEATS):
        seed = str(1000 + rep)
        order = [("reference", ref), ("agent", agent)]
        results = {}
        for who, binary in order if rep % 2 else order[::-1]:
            results[who] = run([binary, *dims, seed], cwd, who == "agent", 120)
            if results[who][0] is None:
                print(f"FAIL: {who} run at {dims}: {results[who][1]}")
                return False
            times[who].append(results[who][0])
        if not same(results["agent"][1], results["reference"][1], f"{dims} seed {seed}"):
            print(f"FAIL: wrong counts at {dims}")
            return False
    ref_t, agent_t = statistics.median(times["reference"]), statistics.median(times["agent"])
    speedup = ref_t / agent_t
    print(f"reference median {ref_t:.3f}s, agent median {agent_t:.3f}s: {speedup:.2f}x")
    good = speedup >= MIN_SPEEDUP
    print(f"{'PASS' if good else 'FAIL'}: at least {MIN_SPEEDUP:g}x faster than the reference")
    return good


sys.exit(0 if main() else 1)

"""Verifier for /app/rolling/rolling.py: the reference's means and standard deviations (within
the stated tolerances), and at least MIN_SPEEDUP times faster than it, measured here.

The agent's module runs only as `nobody` (a copy, in a folder that user owns, with a clean
environment), and every process of `nobody` is killed after each run. Speed is the wall time of
whole `bench.py` runs measured from this process, which nothing in the agent's module can fake;
reference and agent runs alternate on the same readings and the medians are compared, so load on
the machine slows both alike. Every timed run is checked too.
"""
import json
import os
import pwd
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

SRC = "/app/rolling/rolling.py"
HERE = os.path.dirname(os.path.abspath(__file__))
AGENT = pwd.getpwnam("nobody")
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8"}
# (readings, window): one reading, window = length, window 1, window longer than the data.
CASES = [(1, 1), (5, 5), (10, 1), (10, 11), (200, 7), (3000, 64), (5000, 1000), (9000, 2)]
SIZE, REPEATS, MIN_SPEEDUP = (20000, 500), 5, 3.0


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
    """(wall seconds, parsed JSON) of one bench run, or (None, error text). A run
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
    try:
        return elapsed, json.loads(p.stdout)
    except ValueError:
        return None, f"output is not JSON: {p.stdout[:200]!r}"


def agent_copy():
    d = tempfile.mkdtemp()
    shutil.copy(SRC, f"{d}/rolling.py")
    shutil.copy(f"{HERE}/bench.py", f"{d}/bench.py")
    for name in (d, f"{d}/rolling.py", f"{d}/bench.py"):
        os.chown(name, AGENT.pw_uid, AGENT.pw_gid)
    return d


def close(got, want, label):
    for key, tol in (("mean", 1e-9), ("std", 1e-6)):
        a, b = got.get(key) if isinstance(got, dict) else None, want[key]
        if not isinstance(a, list) or len(a) != len(b):
            print(f"  {label}: {key} is not a list of {len(b)} numbers")
            return False
        for i, (x, y) in enumerate(zip(a, b)):
            if not (isinstance(x, float) and abs(x - y) <= tol * (1.0 + abs(y))):
                print(f"  {label}: {key}[{i}] is {x!r}, want {y!r}")
                return False
    return True


def main():
    if not os.path.isfile(SRC):
        print(f"FAIL: {SRC} is missing")
        return False
    d = agent_copy()
    ref = ["python3", "-I", f"{HERE}/bench.py", f"{HERE}/ref_rolling.py"]
    agent = ["python3", "-I", f"{d}/bench.py", f"{d}/rolling.py"]
    ok = True
    for seed, (n, window) in enumerate(CASES, 1):
        args = [str(n), str(window), str(seed)]
        _, want = run(ref + args, d, False, 120)
        took, got = run(agent + args, d, True, 120)
        label = f"{n} readings, window {window}"
        good = took is not None and close(got, want, label)
        if took is None:
            print(f"  {label}: {got}")
        print(f"{'PASS' if good else 'FAIL'}: {label}")
        ok &= good
    if not ok:
        return False
    times = {"reference": [], "agent": []}
    for rep in range(REPEATS):
        args = [str(SIZE[0]), str(SIZE[1]), str(1000 + rep)]
        order = [("reference", ref), ("agent", agent)]
        results = {}
        for who, argv in order if rep % 2 else order[::-1]:
            results[who] = run(argv + args, d, who == "agent", 300)
            if results[who][0] is None:
                print(f"FAIL: {who} run on {args}: {results[who][1]}")
                return False
            times[who].append(results[who][0])
        if not close(results["agent"][1], results["reference"][1], f"{args}"):
            print(f"FAIL: wrong statistics on {args}")
            return False
    ref_t, agent_t = statistics.median(times["reference"]), statistics.median(times["agent"])
    speedup = ref_t / agent_t
    print(f"reference median {ref_t:.3f}s, agent median {agent_t:.3f}s: {speedup:.2f}x")
    good = speedup >= MIN_SPEEDUP
    print(f"{'PASS' if good else 'FAIL'}: at least {MIN_SPEEDUP:g}x faster than the reference")
    return good


sys.exit(0 if main() else 1)

"""Verifier for $APP_DIR/rmsnorm/rmsnorm.py (APP_DIR: /app in the task's container): every case
within tolerance of the float32 reference, and the median time of the agent's kernel at most half
the reference's (PyTorch eager) on a 16384 x 4096 bfloat16 input, on the GPU.

tests/harness.py does the GPU work in a child process; run as root (the task's container, or the
GPU benchmark), that child runs as `nobody` with its own HOME and Triton cache, and every process
of `nobody` is killed after it, so the agent's code cannot write the reward.
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

APP = os.environ.get("APP_DIR", "/app")
SRC = os.path.join(APP, "rmsnorm", "rmsnorm.py")
HERE = os.path.dirname(os.path.abspath(__file__))
MIN_SPEEDUP = 2.0


def unprivileged():
    """The user the agent's code runs as: `nobody` when we are root, else ourselves (also when
    VERIFIER_SAME_USER=1: a machine whose python3 `nobody` cannot run, outside a container)."""
    if os.geteuid() != 0 or os.environ.get("VERIFIER_SAME_USER") == "1":
        return None
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        return None


def end_processes(user):
    if user is None:
        return
    for _ in range(50):
        pids = []
        for entry in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{entry}/status") as f:
                    uid = next(int(x.split()[1]) for x in f if x.startswith("Uid:"))
            except (OSError, StopIteration, ValueError):
                continue
            if uid == user.pw_uid:
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


def run_harness(user):
    work = tempfile.mkdtemp()
    for name in ("harness.py",):
        shutil.copy(os.path.join(HERE, name), work)
    shutil.copy(SRC, os.path.join(work, "rmsnorm.py"))
    os.makedirs(os.path.join(work, "home", "triton"))
    if user is not None:
        for root, dirs, files in os.walk(work):
            for name in [root] + [os.path.join(root, n) for n in dirs + files]:
                os.chown(name, user.pw_uid, user.pw_gid)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(HOME=f"{work}/home", TRITON_CACHE_DIR=f"{work}/home/triton")
    who = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []} if user else {}
    try:
        p = subprocess.run([sys.executable, "-I", "harness.py", "rmsnorm.py"], cwd=work, env=env,
                           capture_output=True, text=True, timeout=480, process_group=0, **who)
    except subprocess.TimeoutExpired:
        print("FAIL: the harness timed out after 480 s")
        return None
    finally:
        end_processes(user)
    lines = p.stdout.strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, ValueError):
        print(f"FAIL: the harness exited {p.returncode}: {p.stderr[-1500:]}")
        return None


def main():
    if not os.path.isfile(SRC):
        print(f"FAIL: {SRC} is missing")
        return False
    report = run_harness(unprivileged())
    if not isinstance(report, dict):
        return False
    ok = True
    for case in report.get("cases") or [{"case": "all", "passed": False, "detail": "none ran"}]:
        print(f"{'PASS' if case.get('passed') is True else 'FAIL'}: {case.get('case')}: "
              f"{case.get('detail')}")
        ok = ok and case.get("passed") is True
    if not ok:
        return False
    try:
        ref = statistics.median(float(t) for t in report["reference_ms"])
        agent = statistics.median(float(t) for t in report["agent_ms"])
    except (KeyError, TypeError, ValueError, statistics.StatisticsError):
        print("FAIL: no timings were reported")
        return False
    if report.get("timed_correct") is not True:
        print("FAIL: a timed run of the kernel gave a wrong result")
        return False
    speedup = ref / agent if agent > 0 else 0.0
    print(f"reference median {ref:.4f} ms, agent median {agent:.4f} ms: {speedup:.2f}x")
    good = speedup >= MIN_SPEEDUP
    print(f"{'PASS' if good else 'FAIL'}: at least {MIN_SPEEDUP:g}x faster than the reference")
    return good


sys.exit(0 if main() else 1)

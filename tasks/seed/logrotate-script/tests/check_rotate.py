"""Scenario tests for /app/rotate.sh: shifting, dropping, compressing, truncating in place.

The agent's script runs as `nobody`, in scenario folders that user owns, with /logs/verifier not
writable by it, and every process it leaves is killed before the next step: the program under
test cannot write the reward or outlive its run.
"""
import gzip
import os
import pwd
import signal
import subprocess
import sys
import tempfile
import time

SCRIPT = "/app/rotate.sh"
AGENT = pwd.getpwnam("nobody")
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8"}


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
    raise SystemExit("FAIL: the script's processes could not be ended")


def scenario_dir():
    """A folder for one scenario, owned by the user the script runs as."""
    d = tempfile.mkdtemp()
    os.chown(d, AGENT.pw_uid, AGENT.pw_gid)
    return d


def hand_over(d):
    """Give the scenario's files to the unprivileged user (modes stay as set)."""
    for root, dirs, names in os.walk(d):
        for n in dirs + names:
            os.chown(os.path.join(root, n), AGENT.pw_uid, AGENT.pw_gid)


def gz(path, text):
    with gzip.open(path, "wb") as f:
        f.write(text.encode())


def state(d):
    out = {}
    for root, _, names in os.walk(d):
        for n in names:
            p = os.path.join(root, n)
            rel = os.path.relpath(p, d)
            data = open(p, "rb").read()
            out[rel] = gzip.decompress(data).decode() if n.endswith(".gz") else data.decode()
    return out


def rotate(d, keep):
    hand_over(d)
    try:
        p = subprocess.run(
            [SCRIPT, d, str(keep)], capture_output=True, text=True, timeout=30, cwd=d, env=ENV,
            user=AGENT.pw_uid, group=AGENT.pw_gid, extra_groups=[], process_group=0,
        )
    except subprocess.TimeoutExpired:
        print(f"  rotate.sh {keep} timed out")
        return False
    finally:
        end_agent_processes()
    if p.returncode != 0:
        print(f"  rotate.sh {keep} exited {p.returncode}: {p.stderr[-400:]}")
    return p.returncode == 0


def compare(label, got, want):
    if got == want:
        print(f"PASS: {label}")
        return True
    print(f"FAIL: {label}")
    for k in sorted(set(got) | set(want)):
        if got.get(k) != want.get(k):
            print(f"  {k!r}: got {got.get(k)!r}, want {want.get(k)!r}")
    return False


def main():
    if not os.path.isfile(SCRIPT) or not os.stat(SCRIPT).st_mode & 0o111:
        print(f"FAIL: {SCRIPT} missing or not executable")
        return False
    os.chmod(SCRIPT, os.stat(SCRIPT).st_mode | 0o555)  # readable and runnable by `nobody`
    os.chmod(os.path.dirname(SCRIPT), 0o755)
    d = scenario_dir()
    with open(f"{d}/app.log", "w") as f:
        f.write("A1\nA2\n")
    os.chmod(f"{d}/app.log", 0o640)
    gz(f"{d}/app.log.1.gz", "B\n")
    gz(f"{d}/app.log.2.gz", "C\n")
    gz(f"{d}/app.log.3.gz", "D\n")
    gz(f"{d}/app.log.7.gz", "stray\n")
    with open(f"{d}/my service.log", "w") as f:
        f.write("spaces\n")
    open(f"{d}/empty.log", "w").close()
    gz(f"{d}/empty.log.1.gz", "E\n")
    with open(f"{d}/notes.txt", "w") as f:
        f.write("not a log\n")
    with open(f"{d}/app.log.old", "w") as f:
        f.write("not .log either\n")
    os.mkdir(f"{d}/sub")
    with open(f"{d}/sub/inner.log", "w") as f:
        f.write("in a subdirectory\n")
    inode = os.stat(f"{d}/app.log").st_ino
    writer = open(f"{d}/app.log", "a")  # a program that keeps the log open

    ok = rotate(d, 3)
    ok &= compare("first rotation (KEEP=3)", state(d), {
        "app.log": "", "app.log.1.gz": "A1\nA2\n", "app.log.2.gz": "B\n", "app.log.3.gz": "C\n",
        "my service.log": "", "my service.log.1.gz": "spaces\n",
        "empty.log": "", "empty.log.1.gz": "E\n", "notes.txt": "not a log\n",
        "app.log.old": "not .log either\n", "sub/inner.log": "in a subdirectory\n"})
    st = os.stat(f"{d}/app.log")
    if st.st_ino != inode or (st.st_mode & 0o7777) != 0o640:
        print(f"FAIL: app.log replaced or mode changed (inode {st.st_ino} vs {inode}, mode {oct(st.st_mode & 0o7777)})")
        ok = False

    writer.write("A3\n")
    writer.close()
    ok &= rotate(d, 3)
    ok &= compare("second rotation (KEEP=3)", state(d), {
        "app.log": "", "app.log.1.gz": "A3\n", "app.log.2.gz": "A1\nA2\n", "app.log.3.gz": "B\n",
        "my service.log": "", "my service.log.1.gz": "spaces\n",
        "empty.log": "", "empty.log.1.gz": "E\n", "notes.txt": "not a log\n",
        "app.log.old": "not .log either\n", "sub/inner.log": "in a subdirectory\n"})

    k = scenario_dir()
    with open(f"{k}/x.log", "w") as f:
        f.write("new\n")
    gz(f"{k}/x.log.1.gz", "old\n")
    gz(f"{k}/x.log.2.gz", "older\n")
    ok &= rotate(k, 1)
    ok &= compare("KEEP=1", state(k), {"x.log": "", "x.log.1.gz": "new\n"})
    return ok


sys.exit(0 if main() else 1)

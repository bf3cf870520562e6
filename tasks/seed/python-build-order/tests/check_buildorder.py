"""Reference implementation + generated cases for /app/tools/buildorder.py.

The agent's tool runs as `nobody` with a clean environment, in a folder that user owns, on case
files it can read but not change, with /logs/verifier not writable by it (test.sh), and every
process it leaves is killed after each case: the program under test cannot write the reward or
outlive its run.
"""
import heapq
import json
import os
import pwd
import random
import signal
import stat
import subprocess
import sys
import tempfile
import time

TOOL = "/app/tools/buildorder.py"
AGENT = pwd.getpwnam("nobody")
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8"}
WORK = tempfile.mkdtemp()  # the case files: the verifier's, readable by `nobody`
os.chmod(WORK, 0o755)
RUN_DIR = os.path.join(WORK, "run")  # the tool's working folder: the user's
os.mkdir(RUN_DIR)
os.chown(RUN_DIR, AGENT.pw_uid, AGENT.pw_gid)


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
    raise SystemExit("FAIL: the tool's processes could not be ended")


def make_readable(top):
    """The agent's tool (and any module beside it) readable by `nobody`; links not followed."""
    for d in ("/app", top):
        if os.path.isdir(d) and not os.path.islink(d):
            os.chmod(d, os.stat(d).st_mode | 0o555)
    for root, dirs, names in os.walk(top):
        for n in dirs + names:
            path = os.path.join(root, n)
            st = os.lstat(path)
            if stat.S_ISDIR(st.st_mode):
                os.chmod(path, stat.S_IMODE(st.st_mode) | 0o555)
            elif stat.S_ISREG(st.st_mode):
                os.chmod(path, stat.S_IMODE(st.st_mode) | 0o444)


def reference(pkgs, targets):
    for t in targets:
        if t not in pkgs:
            return 2, "", f"error: unknown target {t}"
    deps = {p: list((v or {}).get("deps", [])) for p, v in pkgs.items()}
    selected = set(targets) if targets else set(pkgs)
    stack = list(selected)
    while targets and stack:
        for d in deps[stack.pop()]:
            if d in pkgs and d not in selected:
                selected.add(d)
                stack.append(d)
    for p in sorted(selected):
        unknown = sorted(d for d in deps[p] if d not in pkgs)
        if unknown:
            return 2, "", f"error: {p} depends on unknown package {unknown[0]}"
    indeg = {p: len(set(deps[p])) for p in selected}
    users = {p: [] for p in selected}
    for p in selected:
        for d in set(deps[p]):
            users[d].append(p)
    ready = [p for p in selected if indeg[p] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        p = heapq.heappop(ready)
        order.append(p)
        for u in users[p]:
            indeg[u] -= 1
            if indeg[u] == 0:
                heapq.heappush(ready, u)
    if len(order) < len(selected):
        return 3, "", "error: dependency cycle among: " + ", ".join(sorted(selected - set(order)))
    return 0, "".join(p + "\n" for p in order), ""


def dag(seed, n, cycle=False, unknown=False):
    rng = random.Random(seed)
    names = sorted({f"{rng.choice(['lib', 'py', 'go', 'x'])}{rng.choice('abcdefgh')}{i:03d}" for i in range(n)})
    rng.shuffle(names)  # rank = position: deps only point to earlier names -> acyclic
    pkgs = {}
    for i, name in enumerate(names):
        k = rng.randint(0, min(i, 4))
        entry = {"version": f"1.{i}.0"}
        if k or rng.random() < 0.5:
            entry["deps"] = rng.sample(names[:i], k)
        pkgs[name] = entry
    if cycle:
        a, b, c = names[5], names[30], names[60]
        # a -> c -> b -> a: a cycle, plus everything that depends on it
        pkgs[a].setdefault("deps", []).append(c)
        pkgs[c].setdefault("deps", []).append(b)
        pkgs[b].setdefault("deps", []).append(a)
    if unknown:
        pkgs[names[40]].setdefault("deps", []).append("zz-missing")
        pkgs[names[70]].setdefault("deps", []).append("aa-missing")
    return dict(sorted(pkgs.items(), key=lambda kv: rng.random())), names


def run(pkgs, targets, label):
    path = os.path.join(WORK, f"{label}.json")
    with open(path, "w") as f:
        json.dump(pkgs, f)
    want = reference(pkgs, targets)
    os.chmod(path, 0o644)
    try:
        p = subprocess.run(
            ["python3", "-E", "-s", TOOL, path, *targets], capture_output=True, text=True,
            timeout=30, cwd=RUN_DIR, env=ENV, stdin=subprocess.DEVNULL, user=AGENT.pw_uid,
            group=AGENT.pw_gid, extra_groups=[], process_group=0,
        )
        got = (p.returncode, p.stdout, p.stderr.strip())
    except subprocess.TimeoutExpired:
        got = ("timeout", "", "")
    finally:
        end_agent_processes()
    if got != want:
        print(f"FAIL [{label}] targets={targets[:5]}\n  got  exit={got[0]} stdout={got[1][:200]!r} stderr={got[2][-300:]!r}\n"
              f"  want exit={want[0]} stdout={want[1][:200]!r} stderr={want[2]!r}")
        return False
    print(f"PASS [{label}] exit={want[0]} ({want[1].count(chr(10))} lines)")
    return True


def main():
    make_readable(os.path.dirname(TOOL))
    example = json.load(open("/tests/packages.json"))
    cases = [(example, [], "example"), (example, ["web"], "example-web"),
             (example, ["docs", "tls"], "example-two-targets"), (example, ["nope"], "unknown-target")]
    big, names = dag(1, 300)
    cases += [(big, [], "dag-300"), (big, [names[250], names[120]], "dag-targets"),
              (big, [names[10], "missing-target"], "dag-unknown-target")]
    cyc, names = dag(2, 120, cycle=True)
    cases += [(cyc, [], "cycle"), (cyc, [names[3]], "cycle-not-selected"), (cyc, [names[100], names[60]], "cycle-targets")]
    unk, names = dag(3, 120, unknown=True)
    cases += [(unk, [], "unknown-dep"), (unk, [names[20]], "unknown-dep-not-selected")]
    selfdep = {"a": {"deps": ["a"]}, "b": {}, "c": {"deps": ["a", "b"]}, "d": {"deps": ["b", "b"]}}
    cases += [(selfdep, [], "self-dependency"), (selfdep, ["d"], "duplicate-dep")]
    ok = True
    for pkgs, targets, label in cases:
        ok &= run(pkgs, targets, label)
    return ok


sys.exit(0 if main() else 1)

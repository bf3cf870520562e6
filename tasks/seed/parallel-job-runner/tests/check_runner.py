"""Run /app/run_jobs.sh on crafted job files and score four independent properties.

The agent's script runs as `nobody` with a clean environment, with /logs/verifier not writable
by it (test.sh). The job files and the tracker are the verifier's (in a folder the user can
read, not write); the jobs' shared folder and the output folders' parent are the user's. After
the leftover-process check every process of the user is killed: the program under test cannot
write the reward or outlive its run.
"""
import os
import pwd
import signal
import subprocess
import tempfile
import time

SCRIPT = "/app/run_jobs.sh"
AGENT = pwd.getpwnam("nobody")
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8"}
WORK = tempfile.mkdtemp()
os.chmod(WORK, 0o755)
SHARED = os.path.join(WORK, "shared")  # the jobs' rendezvous and concurrency counters
RUNS = os.path.join(WORK, "runs")  # the output folders are created in here by the script
for _d in (SHARED, RUNS):
    os.mkdir(_d)
    os.chown(_d, AGENT.pw_uid, AGENT.pw_gid)
TRACK = os.path.join(WORK, "track.sh")
with open(TRACK, "w") as f:
    # records how many tracked jobs run at the same time (max in $1/max)
    f.write("""d=$1
exec 9>"$d/lock"
flock 9; n=$(( $(cat "$d/n" 2>/dev/null || echo 0) + 1 )); echo $n > "$d/n"
m=$(cat "$d/max" 2>/dev/null || echo 0); [ $n -gt $m ] && echo $n > "$d/max"; flock -u 9
sleep 0.4
flock 9; echo $(( $(cat "$d/n") - 1 )) > "$d/n"; flock -u 9
""")

JOBS = f"""# rendezvous: each waits for the other, so they only succeed when run at the same time
barA 20 touch {SHARED}/a; while [ ! -e {SHARED}/b ]; do sleep 0.05; done; echo A-done
barB 20   touch {SHARED}/b; while [ ! -e {SHARED}/a ]; do sleep 0.05; done; echo "B-done"

ok1 10 echo "hello world"; echo 'err line' >&2
   # indented comment
fail1 10 echo bye; exit 3
slow 1 sleep 307.25 & sleep 308.25 | cat; echo never
quote_me 10 printf '%s|%s\\n' "a b" 'c;d'
""" + "".join(f"conc{i} 20 bash {TRACK} {SHARED}\n" for i in range(8)) + "\t\n"
ALL_OK = "# only good jobs\nx1 5 true\n\nx2 5 echo fine\n"

IDS = ["barA", "barB", "ok1", "fail1", "slow", "quote_me"] + [f"conc{i}" for i in range(8)]
EXPECTED = {"barA": ("0", "ok"), "barB": ("0", "ok"), "ok1": ("0", "ok"), "fail1": ("3", "failed"),
            "slow": ("124", "timeout"), "quote_me": ("0", "ok"), **{f"conc{i}": ("0", "ok") for i in range(8)}}


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


def leftovers():
    p = subprocess.run(["pgrep", "-f", "sleep 30[78].25"], capture_output=True, text=True)
    return p.stdout.split()


def write_jobs(jobfile_text, outdir):
    """The job file, written by the verifier before any of the agent's code runs."""
    path = os.path.join(WORK, os.path.basename(outdir) + ".jobs")
    with open(path, "w") as f:
        f.write(jobfile_text)
    os.chmod(path, 0o644)
    return path


def run(path, outdir):
    """Run the agent's script as `nobody`; its processes are ended by the caller."""
    try:
        return subprocess.run(
            ["bash", SCRIPT, path, outdir], capture_output=True, text=True, timeout=60, cwd=RUNS,
            env=ENV, stdin=subprocess.DEVNULL, user=AGENT.pw_uid, group=AGENT.pw_gid,
            extra_groups=[], process_group=0,
        )
    except subprocess.TimeoutExpired:
        print("  run_jobs.sh did not finish within 60 s")
        return None


def read(path):
    try:
        return open(path).read()
    except OSError:
        return None


def main():
    if not os.path.isfile(SCRIPT):
        print(f"FAIL: {SCRIPT} does not exist")
        return 0.0
    if not os.path.islink(SCRIPT):
        os.chmod(SCRIPT, os.stat(SCRIPT).st_mode | 0o444)  # readable by `nobody`
    os.chmod(os.path.dirname(SCRIPT), 0o755)
    out, out2 = os.path.join(RUNS, "out"), os.path.join(RUNS, "out2")
    jobs, jobs2 = write_jobs(JOBS, out), write_jobs(ALL_OK, out2)
    os.chmod(TRACK, 0o644)
    proc = run(jobs, out)
    left = leftovers()
    end_agent_processes()  # clean up after a runner that leaks processes
    results = read(os.path.join(out, "results.tsv"))
    rows = [l.split("\t") for l in results.splitlines()] if results else []
    got = {r[0]: tuple(r[1:]) for r in rows if len(r) == 3}
    score = 0

    all_ok = run(jobs2, out2)
    end_agent_processes()
    ok = (proc is not None and proc.returncode == 1 and all_ok is not None and all_ok.returncode == 0
          and [r[0] for r in rows] == IDS and all(len(r) == 3 for r in rows)
          and all(got.get(i) == EXPECTED[i] for i in IDS if i not in ("slow", "barA", "barB"))
          and read(os.path.join(out2, "results.tsv")) == "x1\t0\tok\nx2\t0\tok\n")
    print(f"{'PASS' if ok else 'FAIL'}: results.tsv and exit status "
          f"(exit={proc.returncode if proc else None}, all-ok exit={all_ok.returncode if all_ok else None}, rows={rows[:6]}...)")
    score += ok

    logs = {i: read(os.path.join(out, f"{i}.log")) for i in ("ok1", "fail1", "quote_me", "barB")}
    ok = logs == {"ok1": "hello world\nerr line\n", "fail1": "bye\n", "quote_me": "a b|c;d\n", "barB": "B-done\n"}
    print(f"{'PASS' if ok else 'FAIL'}: per-job logs {logs}")
    score += ok

    ok = proc is not None and got.get("slow") == ("124", "timeout") and not left \
        and read(os.path.join(out, "slow.log")) == ""
    print(f"{'PASS' if ok else 'FAIL'}: timeout kills the process tree (slow={got.get('slow')}, leftover pids={left})")
    score += ok

    mx = read(os.path.join(SHARED, "max"))
    ok = got.get("barA") == ("0", "ok") and got.get("barB") == ("0", "ok") and mx is not None \
        and 1 <= int(mx) <= 3
    print(f"{'PASS' if ok else 'FAIL'}: parallel, at most 3 at once (barA={got.get('barA')}, "
          f"barB={got.get('barB')}, max concurrent={mx and mx.strip()})")
    score += ok
    return score / 4


if __name__ == "__main__":
    reward = main()
    print(f"reward = {reward}")
    with open("/logs/verifier/reward.txt", "w") as f:
        f.write(f"{reward}\n")

"""Score the merge in /app/service against a freshly rebuilt copy of the original repository.

The repository is the agent's work: git runs under a config of the verifier's own (test.sh
replaces .git/config, drops hooks and info/attributes; no system or global config, no fsmonitor,
no hooks), so it runs none of the programs the agent's config could name. The merged code's unit
tests run as `nobody` with a clean environment in a folder that user owns, with /logs/verifier
not writable by it (test.sh), and every process they leave is killed: the agent's code cannot
write the reward or outlive its run.
"""
import configparser
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time

REPO = "/app/service"
AGENT = pwd.getpwnam("nobody")
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8"}
GIT_ENV = {**ENV, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
           "GIT_TERMINAL_PROMPT": "0"}


def git(*args, repo=REPO, check=True, text=True):
    return subprocess.run(["git", f"--git-dir={repo}/.git", f"--work-tree={repo}",
                           "-c", f"safe.directory={repo}", "-c", "core.fsmonitor=false",
                           "-c", "core.hooksPath=/dev/null", "-C", repo, *args],
                          capture_output=True, text=text, check=check, env=GIT_ENV).stdout


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
    raise SystemExit("FAIL: the merged code's processes could not be ended")


def hand_over(d):
    """Give a folder and everything in it to the unprivileged user (symlinks not followed)."""
    os.chown(d, AGENT.pw_uid, AGENT.pw_gid)
    for root, dirs, names in os.walk(d):
        for n in dirs + names:
            os.lchown(os.path.join(root, n), AGENT.pw_uid, AGENT.pw_gid)


def run_unit_tests(work):
    """`python3 -m unittest discover -s tests -t .` in WORK, as `nobody`."""
    hand_over(work)
    try:
        return subprocess.run(
            ["python3", "-I", "-m", "unittest", "discover", "-s", "tests", "-t", "."],
            cwd=work, capture_output=True, text=True, timeout=60, env=ENV,
            stdin=subprocess.DEVNULL, user=AGENT.pw_uid, group=AGENT.pw_gid, extra_groups=[],
            process_group=0,
        )
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess([], 124, "", "unit tests did not finish within 60 s")
    finally:
        end_agent_processes()


def ini(text):
    cp = configparser.ConfigParser()
    cp.read_string(text)
    return {s: dict(cp[s]) for s in cp.sections()}


def unreleased(text):
    lines = text.splitlines()
    i = lines.index("## Unreleased")
    j = next(k for k in range(i + 1, len(lines)) if lines[k].startswith("## "))
    return [l for l in lines[i + 1:j] if l.strip()], lines[:i], lines[j:]


def main():
    ref = os.path.join(tempfile.mkdtemp(), "ref")
    subprocess.run(["bash", "/tests/make_repo.sh", ref], check=True, capture_output=True)
    old_main = git("rev-parse", "main", repo=ref).strip()
    feature = git("rev-parse", "feature/rate-limit", repo=ref).strip()
    # Expected resolutions, derived from the two branch tips by the rules in the instruction.
    ours, theirs = ini(git("show", "main:config/settings.ini", repo=ref)), ini(
        git("show", "feature/rate-limit:config/settings.ini", repo=ref))
    want_ini = {s: {**theirs.get(s, {}), **ours.get(s, {})} for s in {*ours, *theirs}}
    o_items, o_head, o_tail = unreleased(git("show", "main:CHANGELOG.md", repo=ref))
    t_items, _, _ = unreleased(git("show", "feature/rate-limit:CHANGELOG.md", repo=ref))
    want_changelog = o_items + t_items

    try:
        tip = git("rev-parse", "--verify", "refs/heads/main").strip()
    except (subprocess.CalledProcessError, OSError) as e:
        print(f"FAIL: cannot read main in {REPO}: {e}")
        return 0.0
    score = 0

    parents = git("rev-list", "--parents", "-n", "1", tip).split()[1:]
    head = git("symbolic-ref", "-q", "HEAD", check=False).strip()
    status = git("status", "--porcelain", "--ignore-submodules=all")  # runs no nested repository
    feat_now = git("rev-parse", "-q", "--verify", "refs/heads/feature/rate-limit", check=False).strip()
    ok = parents == [old_main, feature] and head == "refs/heads/main" and not status and feat_now == feature
    print(f"{'PASS' if ok else 'FAIL'}: merge commit parents={parents} (want {[old_main, feature]}), "
          f"HEAD={head}, feature={feat_now[:12]}, dirty={status!r}")
    score += ok

    text = git("show", f"{tip}:config/settings.ini", check=False)
    try:
        got_ini = ini(text)
        ok = got_ini == want_ini and "<<<<<<<" not in text and ">>>>>>>" not in text
    except (configparser.Error, ValueError) as e:
        got_ini, ok = f"unparsable: {e}", False
    print(f"{'PASS' if ok else 'FAIL'}: settings.ini = {got_ini}" + ("" if ok else f", want {want_ini}"))
    score += ok

    text = git("show", f"{tip}:CHANGELOG.md", check=False)
    try:
        items, head_lines, tail_lines = unreleased(text)
        ok = (items == want_changelog and head_lines == o_head and tail_lines == o_tail
              and "<<<<<<<" not in text)
    except (ValueError, StopIteration):
        items, ok = "no '## Unreleased' section", False
    print(f"{'PASS' if ok else 'FAIL'}: CHANGELOG Unreleased = {items}" + ("" if ok else f", want {want_changelog}"))
    score += ok

    work = tempfile.mkdtemp()
    archive = git("archive", tip, check=False, text=False)
    subprocess.run(["tar", "-x", "--no-same-owner", "--no-same-permissions", "-C", work],
                   input=archive, check=False, capture_output=True)
    tests = os.path.join(work, "tests")
    if os.path.islink(tests) or (os.path.lexists(tests) and not os.path.isdir(tests)):
        os.unlink(tests)
    os.makedirs(tests, exist_ok=True)
    for rev, name in ((old_main, "test_server.py"), (feature, "test_ratelimit.py"), (old_main, "__init__.py")):
        path = os.path.join(tests, name)
        if os.path.lexists(path) and not os.path.isdir(path):
            os.unlink(path)  # never write through a link the agent's tree holds
        with open(path, "w") as f:  # the original, unmodified tests
            f.write(git("show", f"{rev}:tests/{name}", repo=ref))
    run = run_unit_tests(work)
    ok = run.returncode == 0 and "Ran 4 tests" in run.stderr
    print(f"{'PASS' if ok else 'FAIL'}: unit tests at merge commit:\n{run.stderr[-1500:]}")
    score += ok
    shutil.rmtree(work, ignore_errors=True)
    return score / 4


if __name__ == "__main__":
    reward = main()
    print(f"reward = {reward}")
    with open("/logs/verifier/reward.txt", "w") as f:
        f.write(f"{reward}\n")

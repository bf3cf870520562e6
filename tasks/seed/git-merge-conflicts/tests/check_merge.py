"""Score the merge in /app/service against a freshly rebuilt copy of the original repository."""
import configparser
import os
import shutil
import subprocess
import tempfile

REPO = "/app/service"


def git(*args, repo=REPO, check=True):
    return subprocess.run(["git", "-c", f"safe.directory={repo}", "-C", repo, *args],
                          capture_output=True, text=True, check=check).stdout


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
    status = git("status", "--porcelain")
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
    archive = subprocess.run(["git", "-c", f"safe.directory={REPO}", "-C", REPO, "archive", tip],
                             capture_output=True, check=False).stdout
    subprocess.run(["tar", "-x", "-C", work], input=archive, check=False)
    os.makedirs(os.path.join(work, "tests"), exist_ok=True)
    for rev, name in ((old_main, "test_server.py"), (feature, "test_ratelimit.py"), (old_main, "__init__.py")):
        with open(os.path.join(work, "tests", name), "w") as f:  # the original, unmodified tests
            f.write(git("show", f"{rev}:tests/{name}", repo=ref))
    run = subprocess.run(["python3", "-m", "unittest", "discover", "-s", "tests", "-t", "."],
                         cwd=work, capture_output=True, text=True, timeout=60)
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

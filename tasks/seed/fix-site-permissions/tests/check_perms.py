"""Build two fresh copies of the broken tree: one for reference, one that the agent's
/app/fix_perms.sh must fix; then check the fixed copy against the policy.

The agent's script runs as `nobody` with a clean environment, on a copy that user owns (modes
kept, special bits included), with /logs/verifier not writable by it (test.sh), and every
process it leaves is killed before the copy is checked: the program under test cannot write the
reward or outlive its run.
"""
import os
import pwd
import signal
import stat
import subprocess
import tempfile
import time

SCRIPT = "/app/fix_perms.sh"
SITE = os.path.join(tempfile.mkdtemp(), "site")
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


def hand_over(root):
    """Give the tree to the unprivileged user; chown clears setuid/setgid, so every mode is
    set again as it was (symlinks stay as they are)."""
    entries = [root]
    for d, subdirs, names in os.walk(root):
        entries += [os.path.join(d, n) for n in subdirs + names]
    modes = {p: os.lstat(p).st_mode for p in entries}
    for p in entries:
        os.lchown(p, AGENT.pw_uid, AGENT.pw_gid)
    for p, m in modes.items():
        if not stat.S_ISLNK(m):
            os.chmod(p, stat.S_IMODE(m))
    os.chmod(os.path.dirname(root), 0o755)  # root's: the user can enter, not replace ROOT


def run_script():
    """Run the agent's script as `nobody` on SITE; its processes are ended afterwards."""
    if os.path.isfile(SCRIPT) and not os.path.islink(SCRIPT):
        os.chmod(SCRIPT, os.stat(SCRIPT).st_mode | 0o444)  # readable by `nobody`
    os.chmod(os.path.dirname(SCRIPT), 0o755)
    try:
        run = subprocess.run(
            ["bash", SCRIPT, SITE], timeout=60, cwd=SITE, env=ENV, stdin=subprocess.DEVNULL,
            user=AGENT.pw_uid, group=AGENT.pw_gid, extra_groups=[], process_group=0,
        )
        print(f"{SCRIPT} {SITE}: exit code {run.returncode}")
    except subprocess.TimeoutExpired:
        print(f"FAIL: {SCRIPT} did not finish within 60 s")
    finally:
        end_agent_processes()


def is_leftover(name):
    return name.endswith("~") or (name.startswith(".") and name.endswith(".swp"))


def walk(root):
    dirs, files, links = ["."], {}, {}
    for d, subdirs, names in os.walk(root):
        rel = os.path.relpath(d, root)
        for s in list(subdirs):
            p = os.path.normpath(os.path.join(rel, s))
            if os.path.islink(os.path.join(root, p)):
                links[p] = os.readlink(os.path.join(root, p))
            else:
                dirs.append(p)
        for n in names:
            p = os.path.normpath(os.path.join(rel, n))
            full = os.path.join(root, p)
            if os.path.islink(full):
                links[p] = os.readlink(full)
            else:
                files[p] = open(full, "rb").read()
    return dirs, files, links


def want_dir(p):
    if p == "private" or p.startswith("private/"):
        return 0o700
    return 0o1777 if p == "tmp" else 0o755


def want_file(p):
    if p.startswith("private/"):
        return 0o600
    return 0o755 if os.path.dirname(p) == "bin" else 0o644


def mode(p):
    try:
        return stat.S_IMODE(os.lstat(os.path.join(SITE, p)).st_mode)
    except OSError:
        return None


def check_modes(label, paths, want):
    bad = [(p, oct(mode(p)) if mode(p) is not None else "missing", oct(want(p))) for p in paths if mode(p) != want(p)]
    for b in bad[:8]:
        print(f"  {label}: {b[0]} is {b[1]}, want {b[2]}")
    return not bad and bool(paths)


def main():
    ref = os.path.join(tempfile.mkdtemp(), "site")
    subprocess.run(["bash", "/tests/make_site.sh", ref], check=True)
    subprocess.run(["bash", "/tests/make_site.sh", SITE], check=True)
    hand_over(SITE)
    if not os.path.isfile(SCRIPT):
        print(f"FAIL: {SCRIPT} does not exist")
    else:
        run_script()
    dirs, files, links = walk(ref)
    keep = {p: c for p, c in files.items() if not is_leftover(os.path.basename(p))}
    special = [p for p in keep if p.startswith("private/") or os.path.dirname(p) == "bin"]
    other = [p for p in keep if p not in special]
    results = {
        "directory modes": check_modes("dir", dirs, want_dir),
        "private/ and bin/ file modes": check_modes("file", special, want_file),
        "other file modes": check_modes("file", other, want_file),
    }
    ok = True
    for p in files:
        exists = os.path.lexists(os.path.join(SITE, p))
        if is_leftover(os.path.basename(p)) and exists:
            print(f"  leftover not deleted: {p}")
            ok = False
        elif not is_leftover(os.path.basename(p)):
            full = os.path.join(SITE, p)
            if not exists or os.path.islink(full) or not os.path.isfile(full) or open(full, "rb").read() != files[p]:
                print(f"  missing or changed: {p}")
                ok = False
    for p, target in links.items():
        full = os.path.join(SITE, p)
        if not os.path.islink(full) or os.readlink(full) != target:
            print(f"  symlink changed: {p}")
            ok = False
    results["leftovers removed, everything else intact"] = ok
    for name, r in results.items():
        print(f"{'PASS' if r else 'FAIL'}: {name}")
    return sum(results.values()) / len(results)


if __name__ == "__main__":
    reward = main()
    print(f"reward = {reward}")
    with open("/logs/verifier/reward.txt", "w") as f:
        f.write(f"{reward}\n")

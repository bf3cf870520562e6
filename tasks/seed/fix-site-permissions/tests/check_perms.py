"""Build two fresh copies of the broken tree: one for reference, one that the agent's
/app/fix_perms.sh must fix; then check the fixed copy against the policy."""
import os
import stat
import subprocess
import tempfile

SCRIPT = "/app/fix_perms.sh"
SITE = os.path.join(tempfile.mkdtemp(), "site")


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
    if not os.path.isfile(SCRIPT):
        print(f"FAIL: {SCRIPT} does not exist")
    else:
        try:
            run = subprocess.run(["bash", SCRIPT, SITE], timeout=60)
            print(f"{SCRIPT} {SITE}: exit code {run.returncode}")
        except subprocess.TimeoutExpired:
            print(f"FAIL: {SCRIPT} did not finish within 60 s")
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

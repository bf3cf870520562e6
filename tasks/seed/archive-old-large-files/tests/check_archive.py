"""Check the archive against a reference tree rebuilt from the same seeded generator."""
import datetime
import hashlib
import os
import subprocess
import sys
import tempfile

DATA, ARCHIVE = "/app/data", "/app/archive"
CUT = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc).timestamp()


def main():
    ref = os.path.join(tempfile.mkdtemp(), "data")
    subprocess.run(["python3", "/tests/make_data.py", ref], check=True)
    files, links, dirs = {}, {}, set()
    for d, subdirs, names in os.walk(ref):
        for n in subdirs + names:
            full = os.path.join(d, n)
            rel = os.path.relpath(full, ref)
            if os.path.islink(full):
                links[rel] = os.readlink(full)
            elif os.path.isdir(full):
                dirs.add(rel)
            else:
                st = os.stat(full)
                files[rel] = (open(full, "rb").read(), int(st.st_mtime))
    selected = {p for p, (c, m) in files.items() if len(c) >= 102400 and m < CUT}
    print(f"reference: {len(files)} files, {len(selected)} selected")
    problems = []
    for p, (content, mtime) in files.items():
        src, dst = os.path.join(DATA, p), os.path.join(ARCHIVE, p)
        where, other = (dst, src) if p in selected else (src, dst)
        if os.path.lexists(other):
            problems.append(f"{p}: should not exist at {other}")
        if not os.path.isfile(where) or os.path.islink(where):
            problems.append(f"{p}: missing at {where}")
            continue
        if open(where, "rb").read() != content:
            problems.append(f"{p}: content changed")
        if int(os.stat(where).st_mtime) != mtime:
            problems.append(f"{p}: mtime {int(os.stat(where).st_mtime)}, want {mtime}")
    for p, target in links.items():
        full = os.path.join(DATA, p)
        if not os.path.islink(full) or os.readlink(full) != target:
            problems.append(f"symlink {p} changed or missing")
    for d in dirs:
        needed = any(f.startswith(d + "/") for f in set(files) - selected) or any(
            l.startswith(d + "/") for l in links)
        exists = os.path.isdir(os.path.join(DATA, d))
        if needed != exists:
            problems.append(f"directory {d}: {'missing' if needed else 'should have been removed (empty)'}")
    lines = []
    for p in sorted(selected, key=lambda s: s.encode()):
        content, mtime = files[p]
        stamp = datetime.datetime.fromtimestamp(mtime, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        lines.append(f"{p}\t{len(content)}\t{stamp}\t{hashlib.sha256(content).hexdigest()}\n")
    want_manifest = "".join(lines)
    try:
        got_manifest = open(os.path.join(ARCHIVE, "MANIFEST.tsv"), encoding="utf-8").read()
    except (OSError, UnicodeDecodeError) as e:
        got_manifest = f"<{e}>"
    if got_manifest != want_manifest:
        problems.append("MANIFEST.tsv differs:")
        g, w = got_manifest.splitlines(), want_manifest.splitlines()
        for i in range(max(len(g), len(w))):
            if i >= len(g) or i >= len(w) or g[i] != w[i]:
                problems.append(f"  line {i + 1}: got {g[i] if i < len(g) else None!r}\n          want {w[i] if i < len(w) else None!r}")
                break
    for pr in problems[:40]:
        print("FAIL:", pr)
    if not problems:
        print(f"PASS: {len(selected)} files archived, {len(files) - len(selected)} untouched, manifest exact")
    return not problems


sys.exit(0 if main() else 1)

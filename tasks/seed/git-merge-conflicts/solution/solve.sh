#!/bin/bash
# Reference solution: merge, resolve each conflict by the stated rule, port server.py to the
# new limiter API, run the tests, commit.
set -uo pipefail
cd /app/service
git checkout -q main
git merge --no-ff --no-edit feature/rate-limit || true   # conflicts expected

# settings.ini: union of both sides, main ("ours", stage 2) wins where both set a key
python3 - <<'PY'
import configparser, subprocess
def stage(n):
    cp = configparser.ConfigParser()
    cp.read_string(subprocess.run(["git", "show", f":{n}:config/settings.ini"],
                                  capture_output=True, text=True, check=True).stdout)
    return cp
ours, theirs = stage(2), stage(3)
merged = configparser.ConfigParser()
for cp in (theirs, ours):  # later wins
    for sec in cp.sections():
        if not merged.has_section(sec):
            merged.add_section(sec)
        for k, v in cp[sec].items():
            merged[sec][k] = v
# keep main's section order
order = ours.sections() + [s for s in theirs.sections() if s not in ours.sections()]
with open("config/settings.ini", "w") as f:
    for i, sec in enumerate(order):
        f.write(("\n" if i else "") + f"[{sec}]\n")
        for k, v in merged[sec].items():
            f.write(f"{k} = {v}\n")
PY

# CHANGELOG.md: keep both sides of the conflict hunk, ours first
python3 - <<'PY'
out, side = [], None
for line in open("CHANGELOG.md").read().splitlines():
    if line.startswith("<<<<<<< "):
        side = "ours"
    elif line == "=======" and side:
        side = "theirs"
    elif line.startswith(">>>>>>> ") and side:
        side = None
    else:
        out.append(line)
open("CHANGELOG.md", "w").write("\n".join(out) + "\n")
PY

# semantic conflict: server.py still uses the old API
sed -i -e 's/return RateLimiter(limit)$/return RateLimiter(limit, 1.0)/' \
       -e 's/limiter\.allow(now)/limiter.try_acquire(now)/' app/server.py

python3 -m unittest discover -s tests -t . || exit 1
git add -A
git commit -q --no-edit
git log --oneline --graph -n 4

#!/bin/bash
# Reference solution: read the seat map off seats-tui's screen in tmux, pick the block, move the
# cursor there with arrow keys, book / release with Space, write with `w` and quit.
set -euo pipefail
tmux kill-session -t ui 2>/dev/null || true
tmux new-session -d -s ui -x 80 -y 24 'python3 /opt/seats-tui/seats_tui.py'
python3 - <<'PY'
import re
import subprocess
import time


def keys(*names):
    if not names:
        return
    subprocess.run(["tmux", "send-keys", "-t", "ui", *names], check=True)
    time.sleep(0.1)


def screen():
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", "ui"], check=True,
                          capture_output=True, text=True).stdout


def hall():
    for _ in range(50):
        rows = [l for l in screen().splitlines() if re.match(r"^ [A-Z]  ", l)]
        if rows:
            return [[l[5 + 3 * j] for j in range((len(l.rstrip()) - 3) // 3)] for l in rows]
        time.sleep(0.1)
    raise SystemExit("no seat map on screen")


seats = hall()
want = None
for i, row in enumerate(seats):
    for j in range(len(row) - 3):
        if "X" not in row[j:j + 4]:
            want = {(i, j + k) for k in range(4)}
            break
    if want:
        break
mine = {(i, j) for i, row in enumerate(seats) for j, s in enumerate(row) if s == "B"}
at = (0, 0)
for target in sorted(want ^ mine):  # book the missing ones, release the others
    di, dj = target[0] - at[0], target[1] - at[1]
    keys(*(["Down"] * di if di > 0 else ["Up"] * -di))
    keys(*(["Right"] * dj if dj > 0 else ["Left"] * -dj))
    keys("Space")
    at = target
final = hall()
assert {(i, j) for i, row in enumerate(final) for j, s in enumerate(row) if s == "B"} == want
keys("w")
for _ in range(50):
    if "Written to" in screen():
        break
    time.sleep(0.1)
else:
    raise SystemExit("the program did not write the hall")
keys("q")
PY
tmux kill-session -t ui 2>/dev/null || true
cat /app/hall.txt

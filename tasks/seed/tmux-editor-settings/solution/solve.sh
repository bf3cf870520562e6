#!/bin/bash
# Reference solution: drive settings-tui inside tmux, reading its screen (capture-pane) to decide
# each key press, then save with `s` and quit.
set -euo pipefail
tmux kill-session -t ui 2>/dev/null || true
tmux new-session -d -s ui -x 80 -y 24 'python3 /opt/settings-tui/settings_tui.py'
python3 - <<'PY'
import re
import subprocess
import time


def keys(*names):
    subprocess.run(["tmux", "send-keys", "-t", "ui", *names], check=True)
    time.sleep(0.15)


def screen():
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", "ui"], check=True,
                          capture_output=True, text=True).stdout


def shown(label):
    for _ in range(50):
        for line in screen().splitlines():
            if line[2:16].strip() == label:
                return line[18:].strip().strip("<>").strip()
        time.sleep(0.1)
    raise SystemExit(f"row {label!r} not on screen")


def at(label):
    for _ in range(20):
        if any(l.startswith(">") and l[2:16].strip() == label for l in screen().splitlines()):
            return
        keys("Down")
    raise SystemExit(f"could not reach {label!r}")


def choose(label, want):
    at(label)
    for _ in range(10):
        if shown(label) == want:
            return
        keys("Right")
    raise SystemExit(f"{label} never showed {want}")


def number(label, want):
    at(label)
    diff = want - int(shown(label))
    for _ in range(abs(diff)):
        keys("Right" if diff > 0 else "Left")


def toggle(label, on):
    at(label)
    if (shown(label) == "[x]") != on:
        keys("Space")


choose("theme", "solarized")
number("font size", 15)
choose("tab width", "4")
toggle("autosave", True)
toggle("telemetry", False)
at("username")
keys("Enter")
keys(*["BSpace"] * 40)
keys("-l", "Ada Lovelace")
keys("Enter")
keys("s")
for _ in range(50):
    if "Saved to" in screen():
        break
    time.sleep(0.1)
else:
    raise SystemExit("the program did not say it saved")
keys("q")
PY
tmux kill-session -t ui 2>/dev/null || true
cat /app/settings.conf

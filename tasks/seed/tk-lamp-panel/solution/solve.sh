#!/bin/bash
# Reference solution: start a virtual display and window manager, open the panel, click every
# lamp whose state differs from the target (positions relative to the window), click Save.
set -euo pipefail
export DISPLAY=:99
started=""  # the display this script starts, it stops at the end
if ! xdotool getdisplaygeometry >/dev/null 2>&1; then
  setsid Xvfb :99 -screen 0 1024x768x24 -nolisten tcp >/dev/null 2>&1 < /dev/null &
  started="$!"
  for _ in $(seq 50); do xdotool getdisplaygeometry >/dev/null 2>&1 && break; sleep 0.1; done
  setsid matchbox-window-manager -use_titlebar no >/dev/null 2>&1 < /dev/null &
  started="$started $!"
  sleep 0.5
fi
before=$(sha256sum /app/lamps.txt)
setsid python3 /opt/lamp-panel/lamp_panel.py >/dev/null 2>&1 < /dev/null &
app="$!"
win=$(xdotool search --sync --onlyvisible --name '^Lamp panel$' | head -n 1)
xdotool windowactivate --sync "$win" 2>/dev/null || xdotool windowfocus --sync "$win"
sleep 0.3
python3 - "$win" <<'PY'
import subprocess
import sys
import time

win = sys.argv[1]
now = [l.strip() for l in open("/app/lamps.txt") if l.strip()]
want = [l.strip() for l in open("/app/target.txt") if l.strip()]


def click(x, y):
    subprocess.run(["xdotool", "mousemove", "--window", win, str(x), str(y), "click", "1"],
                   check=True)
    time.sleep(0.05)


for r in range(6):
    for c in range(6):
        if now[r][c] != want[r][c]:
            click(20 + 60 * c + 30, 20 + 60 * r + 30)
click(40, 422)  # Save
PY
for _ in $(seq 50); do
  [ "$(sha256sum /app/lamps.txt)" != "$before" ] && break
  sleep 0.1
done
cat /app/lamps.txt
# Leave nothing running: the app, then the display this script started; wait until they are gone.
kill "$app" $started 2>/dev/null || true
wait 2>/dev/null || true

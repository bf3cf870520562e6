#!/bin/bash
# Reference solution: start a virtual display and window manager, open the app, and fill the form
# with xdotool keystrokes (Tab moves between fields, Space picks), then Ctrl+S and Close.
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
was_on=$(python3 -c 'import json; print(json.load(open("/app/invoice_prefs.json"))["send_reminders"])')
setsid python3 /opt/invoice-prefs/prefs_app.py >/dev/null 2>&1 < /dev/null &
app="$!"
win=$(xdotool search --sync --onlyvisible --name '^Invoice preferences$' | head -n 1)
xdotool windowactivate --sync "$win" 2>/dev/null || xdotool windowfocus --sync "$win"
sleep 0.3
k() { xdotool key --delay 30 "$@"; }
# Company name (focused first): clear it, type the new one.
k End $(printf 'BackSpace %.0s' $(seq 40))
xdotool type --delay 20 'Nordlicht Design GmbH'
# Payment terms.
k Tab End $(printf 'BackSpace %.0s' $(seq 6))
xdotool type --delay 20 '14'
# Currency: EUR, USD, GBP radio buttons in tab order; Space picks the focused one.
k Tab Tab Tab space
# Send reminders: Space toggles the check box.
k Tab
[ "$was_on" = "True" ] || k space
k ctrl+s
for _ in $(seq 50); do
  grep -q 'Nordlicht' /app/invoice_prefs.json && break
  sleep 0.1
done
cat /app/invoice_prefs.json
# Leave nothing running: the app, then the display this script started; wait until they are gone.
kill "$app" $started 2>/dev/null || true
wait 2>/dev/null || true

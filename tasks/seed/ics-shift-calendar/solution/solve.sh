#!/bin/bash
# Reference solution: local Berlin wall-clock times to UTC with zoneinfo (overnight shifts end the
# next day), RFC 5545 text escaping, CRLF line endings.
set -euo pipefail
mkdir -p /app/out
python3 - <<'PY'
import csv
import datetime
from zoneinfo import ZoneInfo

berlin, utc = ZoneInfo("Europe/Berlin"), datetime.timezone.utc


def stamp(day, hhmm):
    local = datetime.datetime.combine(day, datetime.time.fromisoformat(hhmm), berlin)
    return local.astimezone(utc).strftime("%Y%m%dT%H%M%SZ")


def text(value):
    return value.replace("\\", "\\\\").replace(";", "\\;").replace(",", "\\,").replace("\n", "\\n")


now = datetime.datetime.now(utc).strftime("%Y%m%dT%H%M%SZ")
lines = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//autoenvscaling//rota//EN"]
with open("/app/data/rota.csv", newline="", encoding="utf-8") as f:
    for r in csv.DictReader(f):
        if r["status"] == "cancelled":
            continue
        day = datetime.date.fromisoformat(r["date"])
        end_day = day + datetime.timedelta(days=1) if r["end"] <= r["start"] else day
        lines += ["BEGIN:VEVENT", f"UID:{r['shift_id']}@rota.example.com", f"DTSTAMP:{now}",
                  f"DTSTART:{stamp(day, r['start'])}", f"DTEND:{stamp(end_day, r['end'])}",
                  f"SUMMARY:{text('Shift: ' + r['employee'])}", f"LOCATION:{text(r['location'])}",
                  f"STATUS:{r['status'].upper()}", "END:VEVENT"]
lines.append("END:VCALENDAR")
with open("/app/out/rota.ics", "w", newline="", encoding="utf-8") as f:
    f.write("\r\n".join(lines) + "\r\n")
PY

"""Parse /app/out/rota.ics (unfolding, parameters, escapes) and compare every event, in UTC,
with the shifts of the regenerated rota."""
import csv
import datetime
import re
import subprocess
import sys
import tempfile
from zoneinfo import ZoneInfo

BERLIN, UTC = ZoneInfo("Europe/Berlin"), datetime.timezone.utc


def expected():
    d = tempfile.mkdtemp()
    subprocess.run([sys.executable, "/tests/gen_rota.py", f"{d}/rota.csv"], check=True)
    out = {}
    with open(f"{d}/rota.csv", newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            if r["status"] == "cancelled":
                continue
            day = datetime.date.fromisoformat(r["date"])
            start = datetime.datetime.combine(day, datetime.time.fromisoformat(r["start"]), BERLIN)
            end = datetime.datetime.combine(day, datetime.time.fromisoformat(r["end"]), BERLIN)
            if end <= start:
                end = datetime.datetime.combine(day + datetime.timedelta(days=1),
                                                datetime.time.fromisoformat(r["end"]), BERLIN)
            out[f"{r['shift_id']}@rota.example.com"] = {
                "DTSTART": start.astimezone(UTC), "DTEND": end.astimezone(UTC),
                "SUMMARY": f"Shift: {r['employee']}", "LOCATION": r["location"],
                "STATUS": r["status"].upper()}
    return out


def unescape(v):
    return re.sub(r"\\([\\;,nN])", lambda m: "\n" if m.group(1) in "nN" else m.group(1), v)


def when(params, value):
    if value.endswith("Z"):
        return datetime.datetime.strptime(value, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    if params.get("TZID") == "Europe/Berlin":
        local = datetime.datetime.strptime(value, "%Y%m%dT%H%M%S")
        return local.replace(tzinfo=BERLIN).astimezone(UTC)
    raise ValueError(f"floating or unsupported time {value!r} ({params})")


def parse(raw):
    if "\n" in raw.replace("\r\n", ""):
        raise ValueError("a line does not end with CRLF")
    lines = re.sub(r"\r\n[ \t]", "", raw).split("\r\n")
    events, cal, stack, props = [], {}, [], None
    for line in filter(None, lines):
        m = re.match(r"^([A-Za-z0-9-]+)((?:;[^:;]+=[^:;]*)*):(.*)$", line)
        if not m:
            raise ValueError(f"cannot read line {line!r}")
        name, value = m.group(1).upper(), m.group(3)
        params = dict(p.split("=", 1) for p in m.group(2).split(";")[1:])
        params = {k.upper(): v.strip('"') for k, v in params.items()}
        if name in ("BEGIN", "END"):
            stack = stack + [value.upper()] if name == "BEGIN" else stack[:-1]
            if name == "BEGIN" and value.upper() == "VEVENT":
                props = {}
            elif name == "END" and value.upper() == "VEVENT":
                events.append(props)
                props = None
        elif stack == ["VCALENDAR"]:
            cal[name] = value
        elif stack == ["VCALENDAR", "VEVENT"]:
            props[name] = when(params, value) if name in ("DTSTART", "DTEND") else unescape(value)
    if lines[0] != "BEGIN:VCALENDAR" or stack:
        raise ValueError("not one closed VCALENDAR")
    return cal, events


def main():
    want = expected()
    try:
        with open("/app/out/rota.ics", newline="", encoding="utf-8") as f:
            cal, events = parse(f.read())
    except (OSError, ValueError) as e:
        print(f"FAIL: /app/out/rota.ics: {e}")
        return False
    if cal.get("VERSION") != "2.0" or not cal.get("PRODID"):
        print(f"FAIL: VCALENDAR needs VERSION:2.0 and a PRODID, has {sorted(cal)}")
        return False
    got = {}
    for ev in events:
        missing = [k for k in ("UID", "DTSTAMP", "DTSTART", "DTEND", "SUMMARY", "LOCATION", "STATUS")
                   if k not in ev]
        if missing:
            print(f"FAIL: event {ev.get('UID', '?')} lacks {missing}")
            return False
        got[ev["UID"]] = {k: ev[k] for k in ("DTSTART", "DTEND", "SUMMARY", "LOCATION", "STATUS")}
    if len(events) != len(got) or set(got) != set(want):
        print(f"FAIL: {len(events)} events with UIDs {sorted(got)[:5]}..., want {len(want)}: "
              f"missing {sorted(set(want) - set(got))[:5]}, extra {sorted(set(got) - set(want))[:5]}")
        return False
    ok = True
    for uid in sorted(want):
        if got[uid] != want[uid]:
            diff = {k: (got[uid][k], want[uid][k]) for k in want[uid] if got[uid][k] != want[uid][k]}
            print(f"FAIL: {uid}: (got, want) {diff}")
            ok = False
    if ok:
        print(f"PASS: all {len(want)} shifts are events at the right UTC times")
    return ok


sys.exit(0 if main() else 1)

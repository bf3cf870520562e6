"""Regenerate the logs in a temp dir, derive the expected rows, compare with the agent's files."""
import collections
import csv
import gzip
import json
import re
import subprocess
import sys
import tempfile

HEAD = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) (\S+) \[([^\]]*)\] (\S+?): (.*)")


def expected():
    d = tempfile.mkdtemp()
    subprocess.run(["python3", "/tests/gen_logs.py", d], check=True)
    text = gzip.open(f"{d}/app.log.2.gz", "rt").read() + open(f"{d}/app.log.1").read() + open(f"{d}/app.log").read()
    records = []
    for line in text.splitlines():
        m = HEAD.match(line)
        if m:
            records.append([m.groups(), []])
        else:
            records[-1][1].append(line)
    rows = []
    for (ts, level, rid, logger, _msg), cont in records:
        if level not in ("ERROR", "CRITICAL"):
            continue
        exc = ""
        if "Traceback (most recent call last):" in cont:
            exc = cont[-1].split(":", 1)[0].strip()
        rows.append([ts, level, rid, logger, exc])
    rows.sort(key=lambda r: r[0])
    counts = collections.Counter(r[4] for r in rows if r[4])
    return rows, dict(counts)


def main():
    rows, counts = expected()
    ok = True
    try:
        with open("/app/errors.csv", newline="") as f:
            got = list(csv.reader(f))
    except OSError as e:
        print(f"FAIL: /app/errors.csv: {e}")
        return False
    if not got or got[0] != ["timestamp", "level", "request_id", "logger", "exception"]:
        print(f"FAIL: header is {got[:1]}")
        ok = False
    body = got[1:]
    if body != rows:
        ok = False
        print(f"FAIL: errors.csv has {len(body)} rows, expected {len(rows)}")
        for i, (a, b) in enumerate(zip(body, rows)):
            if a != b:
                print(f"  first difference at data row {i + 1}: got {a}, want {b}")
                break
    else:
        print(f"PASS: errors.csv ({len(rows)} rows)")
    try:
        got_counts = json.load(open("/app/exception_counts.json"))
    except (OSError, ValueError) as e:
        print(f"FAIL: /app/exception_counts.json: {e}")
        return False
    if got_counts != counts:
        print(f"FAIL: exception_counts.json = {got_counts}, want {counts}")
        ok = False
    else:
        print("PASS: exception_counts.json")
    return ok


sys.exit(0 if main() else 1)

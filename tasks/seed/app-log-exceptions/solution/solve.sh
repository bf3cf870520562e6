#!/bin/bash
# Reference solution: stream the rotated logs oldest-first, group continuation lines into
# records, keep ERROR/CRITICAL records and pull the final exception out of tracebacks.
set -euo pipefail
cd /app
{ zcat logs/app.log.2.gz; cat logs/app.log.1 logs/app.log; } | python3 -c '
import collections, csv, json, re, sys
head = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) (\S+) \[([^\]]*)\] (\S+?): ")
records = []
for line in sys.stdin.read().splitlines():
    m = head.match(line)
    if m:
        records.append((m.groups(), []))
    elif records:
        records[-1][1].append(line)
rows = []
for (ts, level, rid, logger), cont in records:
    if level in ("ERROR", "CRITICAL"):
        tb = "Traceback (most recent call last):" in cont
        rows.append([ts, level, rid, logger, cont[-1].split(":", 1)[0].strip() if tb else ""])
rows.sort(key=lambda r: r[0])
with open("/app/errors.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["timestamp", "level", "request_id", "logger", "exception"])
    w.writerows(rows)
counts = collections.Counter(r[4] for r in rows if r[4])
with open("/app/exception_counts.json", "w") as f:
    json.dump(dict(sorted(counts.items())), f, indent=2)
'

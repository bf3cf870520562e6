#!/bin/bash
# Reference solution: parse the log with the documented regex and build the report.
set -euo pipefail
cd /app
python3 - <<'PY'
import collections, json, re

line_re = re.compile(r'(\S+) \S+ \S+ \[([^\]]+)\] "(\S+) (\S+) (\S+)" (\d{3}) (\d+|-) "([^"]*)" "([^"]*)"')
with open("/app/logs/access.log", encoding="utf-8", errors="replace", newline="") as f:
    lines = f.read().split("\n")
if lines and lines[-1] == "":
    lines.pop()  # trailing newline does not start another line
valid = [m for m in map(line_re.fullmatch, lines) if m]
paths = collections.Counter(m.group(4).split("?", 1)[0] for m in valid)
report = {
    "total_requests": len(valid),
    "malformed_lines": len(lines) - len(valid),
    "status_counts": dict(collections.Counter(m.group(6) for m in valid)),
    "top_paths": [{"path": p, "count": c}
                  for p, c in sorted(paths.items(), key=lambda kv: (-kv[1], kv[0]))[:5]],
    "unique_ips": len({m.group(1) for m in valid}),
    "error_rate": round(sum(int(m.group(6)) >= 500 for m in valid) / len(valid), 4),
}
with open("/app/report.json", "w") as f:
    json.dump(report, f, indent=2)
PY

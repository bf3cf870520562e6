#!/bin/bash
# Reference solution: git bisect run with a probe that skips (exit 125) commits where
# calc.py does not run at all.
set -euo pipefail
cd /app/calc
cat > /tmp/probe.sh <<'SH'
#!/bin/bash
out=$(python3 calc.py '2^3^2' 2>/dev/null) || exit 125
[ "$out" = "512" ]
SH
chmod +x /tmp/probe.sh
git bisect start main "$(git rev-list --max-parents=0 main)"
git bisect run /tmp/probe.sh
git rev-parse refs/bisect/bad > /app/first_bad.txt
git bisect reset
git log -1 --format='%H %s' "$(cat /app/first_bad.txt)"

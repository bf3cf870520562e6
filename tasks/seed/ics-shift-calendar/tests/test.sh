#!/bin/bash
# Verifier (binary): /app/out/rota.ics is parsed (RFC 5545 unfolding, escapes, TZID or UTC) and
# every event compared, in UTC, with the shifts of the rota regenerated from tests/gen_rota.py.
set -u
mkdir -p /logs/verifier
chmod 755 /logs /logs/verifier
rm -f /logs/verifier/reward.json
echo 0.0 > /logs/verifier/reward.txt
python3 -I /tests/check_ics.py && echo 1.0 > /logs/verifier/reward.txt
rm -f /logs/verifier/reward.json
cat /logs/verifier/reward.txt

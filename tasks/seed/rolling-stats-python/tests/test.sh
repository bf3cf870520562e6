#!/bin/bash
# Verifier (binary): /app/rolling/rolling.py must match the reference's window means and
# standard deviations and be at least 3x faster than it on 20000 readings, window 500
# (tests/check_rolling.py). The agent's module runs as `nobody`; /logs and /logs/verifier are
# made root-only first, so nothing it runs can write the reward.
set -u
mkdir -p /logs/verifier
chmod 755 /logs /logs/verifier
rm -f /logs/verifier/reward.json
echo 0.0 > /logs/verifier/reward.txt
python3 -I /tests/check_rolling.py && echo 1.0 > /logs/verifier/reward.txt
rm -f /logs/verifier/reward.json
cat /logs/verifier/reward.txt

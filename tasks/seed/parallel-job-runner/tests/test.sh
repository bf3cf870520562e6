#!/bin/bash
# Verifier: partial credit, 0.25 per check in tests/check_runner.py (results + exit status,
# per-job logs, timeouts that kill whole process trees, real parallelism capped at 3).
# The agent's script runs as `nobody` (check_runner.py); /logs and /logs/verifier are made
# root-only first, so nothing it runs can write the reward or swap the folder.
set -u
mkdir -p /logs/verifier
chmod 755 /logs /logs/verifier
rm -f /logs/verifier/reward.json
echo 0.0 > /logs/verifier/reward.txt
python3 -I /tests/check_runner.py
rm -f /logs/verifier/reward.json
cat /logs/verifier/reward.txt

#!/bin/bash
# Verifier: partial credit, 0.25 per check in tests/check_runner.py (results + exit status,
# per-job logs, timeouts that kill whole process trees, real parallelism capped at 3).
set -u
mkdir -p /logs/verifier
echo 0.0 > /logs/verifier/reward.txt
python3 /tests/check_runner.py
cat /logs/verifier/reward.txt

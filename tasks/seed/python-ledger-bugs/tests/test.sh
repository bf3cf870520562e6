#!/bin/bash
# Verifier: partial credit, 0.25 per check in tests/check_ledger.py (the original unit tests,
# the full report, the date-range report, the tag report).
set -u
mkdir -p /logs/verifier
echo 0.0 > /logs/verifier/reward.txt
python3 /tests/check_ledger.py
cat /logs/verifier/reward.txt

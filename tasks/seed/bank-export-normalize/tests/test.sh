#!/bin/bash
# Verifier (binary): /app/output/transactions.csv must be the exact normalised export.
set -u
mkdir -p /logs/verifier
echo 0.0 > /logs/verifier/reward.txt
python3 /tests/check_transactions.py && echo 1.0 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

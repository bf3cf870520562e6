#!/bin/bash
# Verifier (binary): /app/out/customers.json must match the summary recomputed from the data.
set -u
mkdir -p /logs/verifier
echo 0.0 > /logs/verifier/reward.txt
python3 /tests/check_summary.py && echo 1.0 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

#!/bin/bash
# Verifier (binary): /app/hist/histogram.c must give the reference's exact counts and be at least
# 5x faster than its bin scan with 500000 values and 1500 bins (tests/check_histogram.py). The
# agent's code runs as `nobody`; /logs and /logs/verifier are made root-only first, so nothing it
# runs can write the reward.
set -u
mkdir -p /logs/verifier
chmod 755 /logs /logs/verifier
rm -f /logs/verifier/reward.json
echo 0.0 > /logs/verifier/reward.txt
python3 -I /tests/check_histogram.py && echo 1.0 > /logs/verifier/reward.txt
rm -f /logs/verifier/reward.json
cat /logs/verifier/reward.txt

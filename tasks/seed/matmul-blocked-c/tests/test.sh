#!/bin/bash
# Verifier (binary): /app/matmul/matmul.c must match the reference on odd shapes and be at least
# 3x faster than it at 768x768 (tests/check_matmul.py). The agent's code runs as `nobody`;
# /logs and /logs/verifier are made root-only first, so nothing it runs can write the reward.
set -u
mkdir -p /logs/verifier
chmod 755 /logs /logs/verifier
rm -f /logs/verifier/reward.json
echo 0.0 > /logs/verifier/reward.txt
python3 -I /tests/check_matmul.py && echo 1.0 > /logs/verifier/reward.txt
rm -f /logs/verifier/reward.json
cat /logs/verifier/reward.txt

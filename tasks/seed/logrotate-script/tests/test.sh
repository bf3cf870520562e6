#!/bin/bash
# Verifier (binary): build scenarios in temp dirs, run /app/rotate.sh, check every file.
set -u
mkdir -p /logs/verifier
echo 0.0 > /logs/verifier/reward.txt
python3 /tests/check_rotate.py && echo 1.0 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

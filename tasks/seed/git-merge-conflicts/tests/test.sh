#!/bin/bash
# Verifier: partial credit, 0.25 for each of the four requirements in instruction.md.
set -u
mkdir -p /logs/verifier
echo 0.0 > /logs/verifier/reward.txt
python3 /tests/check_merge.py
cat /logs/verifier/reward.txt

#!/bin/bash
# Verifier (binary): both output files must match what the rules in instruction.md give.
set -u
mkdir -p /logs/verifier
echo 0.0 > /logs/verifier/reward.txt
python3 /tests/check_errors.py && echo 1.0 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

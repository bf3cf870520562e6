#!/bin/bash
# Verifier (binary): run /app/report.sql on a fresh copy of the task database and on a database
# generated with another seed; compare with results computed in Python.
set -u
mkdir -p /logs/verifier
echo 0.0 > /logs/verifier/reward.txt
python3 /tests/check_report.py && echo 1.0 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

#!/bin/bash
# Verifier: partial credit, one fifth per correct part of /app/report.json.
set -u
mkdir -p /logs/verifier
echo 0.0 > /logs/verifier/reward.txt
python3 /tests/check_report.py

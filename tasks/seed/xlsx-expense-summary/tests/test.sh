#!/bin/bash
# Verifier (binary): the workbook's Data sheet must hold the CSV's records with real types, and
# its Summary formulas must compute the right totals, also after the data is edited.
set -u
mkdir -p /logs/verifier
chmod 755 /logs /logs/verifier
rm -f /logs/verifier/reward.json
echo 0.0 > /logs/verifier/reward.txt
python3 -I /tests/check_workbook.py && echo 1.0 > /logs/verifier/reward.txt
rm -f /logs/verifier/reward.json
cat /logs/verifier/reward.txt

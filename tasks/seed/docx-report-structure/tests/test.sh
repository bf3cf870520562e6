#!/bin/bash
# Verifier (binary): /app/out/report.docx, read block by block with python-docx, must have the
# title and heading styles, real tables, no draft or empty paragraphs and the body text intact.
set -u
mkdir -p /logs/verifier
chmod 755 /logs /logs/verifier
rm -f /logs/verifier/reward.json
echo 0.0 > /logs/verifier/reward.txt
python3 -I /tests/check_report.py && echo 1.0 > /logs/verifier/reward.txt
rm -f /logs/verifier/reward.json
cat /logs/verifier/reward.txt

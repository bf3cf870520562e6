#!/bin/bash
# Verifier (binary): every invoice's fields in /app/out/invoices.json must match the records the
# PDFs were generated from (tests/make_invoices.py is the generator the image ran).
set -u
mkdir -p /logs/verifier
chmod 755 /logs /logs/verifier
rm -f /logs/verifier/reward.json
echo 0.0 > /logs/verifier/reward.txt
python3 -I /tests/check_invoices.py && echo 1.0 > /logs/verifier/reward.txt
rm -f /logs/verifier/reward.json
cat /logs/verifier/reward.txt

#!/bin/bash
# Verifier (count-lines, variant 10000): line count of /app/ledger.dat: 29.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/output.txt)" = "29" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

#!/bin/bash
# Verifier (line-count, variant 20005): line count of /app/ledger.lst: 27.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/output.txt)" = "27" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

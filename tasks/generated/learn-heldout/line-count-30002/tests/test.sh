#!/bin/bash
# Verifier (line-count, variant 30002): line count of /app/records.lst: 28.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/output.txt)" = "28" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

#!/bin/bash
# Verifier (line-count, variant 30020): line count of /app/stock.lst: 29.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/output.txt)" = "29" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

#!/bin/bash
# Verifier (count-lines, variant 20014): line count of /app/samples.txt: 29.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/summary.txt)" = "29" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

#!/bin/bash
# Verifier (line-count, variant 30007): line count of /app/stock.dat: 7.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/tally.txt)" = "7" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

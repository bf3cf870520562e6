#!/bin/bash
# Verifier (count-lines, variant 30018): line count of /app/stock.dat: 16.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/tally.txt)" = "16" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

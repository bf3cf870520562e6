#!/bin/bash
# Verifier (count-lines, variant 30010): line count of /app/stock.dat: 8.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/total.txt)" = "8" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

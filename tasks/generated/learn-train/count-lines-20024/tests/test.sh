#!/bin/bash
# Verifier (count-lines, variant 20024): line count of /app/stock.lst: 22.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/tally.txt)" = "22" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

#!/bin/bash
# Verifier (count-lines, variant 20009): lines of /app/stock.txt equal to lantern: 2.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/tally.txt)" = "2" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

#!/bin/bash
# Verifier (sum-numbers, variant 0): sum of /app/stock.log (lines): 5412.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/tally.txt)" = "5412" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

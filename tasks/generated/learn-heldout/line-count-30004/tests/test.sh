#!/bin/bash
# Verifier (line-count, variant 30004): line count of /app/stock.log: 19.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/total.txt)" = "19" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

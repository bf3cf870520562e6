#!/bin/bash
# Verifier (line-count, variant 30017): line count of /app/stock.log: 27.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/result.txt)" = "27" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

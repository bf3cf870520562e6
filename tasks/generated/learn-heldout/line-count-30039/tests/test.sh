#!/bin/bash
# Verifier (line-count, variant 30039): line count of /app/stock.lst: 12.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/total.txt)" = "12" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

#!/bin/bash
# Verifier (count-lines, variant 30022): line count of /app/orders.lst: 23.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/summary.txt)" = "23" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

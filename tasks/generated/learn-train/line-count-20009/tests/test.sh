#!/bin/bash
# Verifier (line-count, variant 20009): line count of /app/metrics.log: 21.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/output.txt)" = "21" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

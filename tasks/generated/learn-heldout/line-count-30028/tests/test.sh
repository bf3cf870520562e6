#!/bin/bash
# Verifier (line-count, variant 30028): line count of /app/metrics.lst: 30.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/final.txt)" = "30" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

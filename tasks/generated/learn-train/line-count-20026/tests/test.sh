#!/bin/bash
# Verifier (line-count, variant 20026): line count of /app/metrics.dat: 27.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/final.txt)" = "27" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

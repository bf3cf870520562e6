#!/bin/bash
# Verifier (line-count, variant 30034): line count of /app/readings.lst: 24.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/output.txt)" = "24" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

#!/bin/bash
# Verifier (line-count, variant 30021): line count of /app/readings.dat: 19.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/output.txt)" = "19" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

#!/bin/bash
# Verifier (line-count, variant 20024): line count of /app/readings.txt: 8.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/value.txt)" = "8" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

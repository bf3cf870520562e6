#!/bin/bash
# Verifier (line-count, variant 20014): line count of /app/readings.dat: 28.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/value.txt)" = "28" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

#!/bin/bash
# Verifier (count-lines, variant 30029): line count of /app/readings.lst: 13.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/summary.txt)" = "13" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

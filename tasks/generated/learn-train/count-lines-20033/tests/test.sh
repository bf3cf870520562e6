#!/bin/bash
# Verifier (count-lines, variant 20033): lines of /app/readings.txt equal to maple: 4.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/summary.txt)" = "4" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

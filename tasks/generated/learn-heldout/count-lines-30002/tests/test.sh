#!/bin/bash
# Verifier (count-lines, variant 30002): line count of /app/readings.lst: 7.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/figure.txt)" = "7" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

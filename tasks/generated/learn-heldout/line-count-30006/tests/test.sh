#!/bin/bash
# Verifier (line-count, variant 30006): line count of /app/scores.dat: 8.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/figure.txt)" = "8" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

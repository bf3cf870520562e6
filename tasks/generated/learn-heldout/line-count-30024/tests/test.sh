#!/bin/bash
# Verifier (line-count, variant 30024): line count of /app/scores.dat: 23.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/total.txt)" = "23" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

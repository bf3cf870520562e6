#!/bin/bash
# Verifier (line-count, variant 30010): line count of /app/scores.dat: 6.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/result.txt)" = "6" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

#!/bin/bash
# Verifier (line-count, variant 30001): line count of /app/scores.lst: 11.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/value.txt)" = "11" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

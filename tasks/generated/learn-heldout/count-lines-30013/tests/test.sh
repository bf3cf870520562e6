#!/bin/bash
# Verifier (count-lines, variant 30013): line count of /app/scores.lst: 26.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/final.txt)" = "26" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

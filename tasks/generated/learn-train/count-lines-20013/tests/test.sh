#!/bin/bash
# Verifier (count-lines, variant 20013): lines of /app/scores.lst equal to pixel: 1.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/output.txt)" = "1" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

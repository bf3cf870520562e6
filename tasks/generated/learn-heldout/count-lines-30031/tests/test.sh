#!/bin/bash
# Verifier (count-lines, variant 30031): line count of /app/scores.lst: 28.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/figure.txt)" = "28" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

#!/bin/bash
# Verifier (line-count, variant 20004): line count of /app/scores.lst: 25.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/tally.txt)" = "25" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

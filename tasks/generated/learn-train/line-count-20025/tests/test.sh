#!/bin/bash
# Verifier (line-count, variant 20025): line count of /app/queue.txt: 21.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/tally.txt)" = "21" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

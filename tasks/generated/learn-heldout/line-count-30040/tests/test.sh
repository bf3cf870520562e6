#!/bin/bash
# Verifier (line-count, variant 30040): line count of /app/events.log: 8.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/answer.txt)" = "8" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

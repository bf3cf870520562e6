#!/bin/bash
# Verifier (line-count, variant 20022): line count of /app/events.txt: 24.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/final.txt)" = "24" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

#!/bin/bash
# Verifier (line-count, variant 30018): line count of /app/values.lst: 6.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/final.txt)" = "6" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

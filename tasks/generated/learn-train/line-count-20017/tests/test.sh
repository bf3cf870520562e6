#!/bin/bash
# Verifier (line-count, variant 20017): line count of /app/batch.lst: 9.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/final.txt)" = "9" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

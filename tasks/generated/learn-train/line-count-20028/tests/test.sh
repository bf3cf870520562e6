#!/bin/bash
# Verifier (line-count, variant 20028): line count of /app/data.lst: 29.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/result.txt)" = "29" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

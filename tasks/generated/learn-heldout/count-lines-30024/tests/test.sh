#!/bin/bash
# Verifier (count-lines, variant 30024): line count of /app/data.log: 21.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/value.txt)" = "21" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

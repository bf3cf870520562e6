#!/bin/bash
# Verifier (count-lines, variant 30021): line count of /app/values.txt: 15.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/count.txt)" = "15" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

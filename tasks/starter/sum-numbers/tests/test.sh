#!/bin/bash
# Verifier: /app/sum.txt holds the sum of /app/nums.txt (1470).
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/sum.txt)" = "1470" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

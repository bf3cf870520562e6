#!/bin/bash
# Verifier (line-count, variant 20013): line count of /app/values.dat: 24.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/total.txt)" = "24" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

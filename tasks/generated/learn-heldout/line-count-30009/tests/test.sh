#!/bin/bash
# Verifier (line-count, variant 30009): line count of /app/records.dat: 27.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/total.txt)" = "27" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

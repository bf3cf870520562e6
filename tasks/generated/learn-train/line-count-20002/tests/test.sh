#!/bin/bash
# Verifier (line-count, variant 20002): line count of /app/values.dat: 22.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/value.txt)" = "22" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

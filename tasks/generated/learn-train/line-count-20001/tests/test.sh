#!/bin/bash
# Verifier (line-count, variant 20001): line count of /app/entries.dat: 30.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/count.txt)" = "30" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

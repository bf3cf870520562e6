#!/bin/bash
# Verifier (count-lines, variant 20026): lines of /app/entries.log equal to silver: 1.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/count.txt)" = "1" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

#!/bin/bash
# Verifier (line-count, variant 20000): line count of /app/entries.txt: 12.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/total.txt)" = "12" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

#!/bin/bash
# Verifier (line-count, variant 30008): line count of /app/items.lst: 16.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/output.txt)" = "16" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

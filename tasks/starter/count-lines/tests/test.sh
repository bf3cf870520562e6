#!/bin/bash
# Verifier: /app/count.txt holds the line count of /app/data.txt (21).
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/count.txt)" = "21" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

#!/bin/bash
# Verifier (count-lines, variant 20018): line count of /app/inventory.log: 25.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/summary.txt)" = "25" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

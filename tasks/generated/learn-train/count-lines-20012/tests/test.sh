#!/bin/bash
# Verifier (count-lines, variant 20012): line count of /app/inventory.dat: 7.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/final.txt)" = "7" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

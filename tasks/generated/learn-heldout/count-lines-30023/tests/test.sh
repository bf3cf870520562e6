#!/bin/bash
# Verifier (count-lines, variant 30023): line count of /app/inventory.lst: 17.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/output.txt)" = "17" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

#!/bin/bash
# Verifier (line-count, variant 20029): line count of /app/inventory.log: 30.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/answer.txt)" = "30" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

#!/bin/bash
# Verifier (sum-numbers, variant 10001): sum of /app/queue.log (commas): 5758.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/final.txt)" = "5758" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

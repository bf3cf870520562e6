#!/bin/bash
# Verifier (sort-numbers, variant 0): /app/result.txt is /app/events.log sorted smallest first.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
printf '117\n142\n215\n278\n323\n424\n478\n' | cmp -s - /app/result.txt && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

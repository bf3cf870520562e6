#!/bin/bash
# Verifier (count-lines, variant 30015): lines of /app/items.log equal to river: 4.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/count.txt)" = "4" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

#!/bin/bash
# Verifier (count-lines, variant 30005): line count of /app/data.txt: 18.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/figure.txt)" = "18" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

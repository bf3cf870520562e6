#!/bin/bash
# Verifier (line-count, variant 20008): line count of /app/batch.txt: 15.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/figure.txt)" = "15" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

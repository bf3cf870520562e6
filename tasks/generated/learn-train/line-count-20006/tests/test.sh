#!/bin/bash
# Verifier (line-count, variant 20006): line count of /app/batch.dat: 18.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/figure.txt)" = "18" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

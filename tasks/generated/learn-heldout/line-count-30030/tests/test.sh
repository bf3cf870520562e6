#!/bin/bash
# Verifier (line-count, variant 30030): line count of /app/orders.lst: 11.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/figure.txt)" = "11" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

#!/bin/bash
# Verifier (line-count, variant 30014): line count of /app/orders.dat: 17.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/value.txt)" = "17" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

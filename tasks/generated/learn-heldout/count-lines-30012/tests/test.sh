#!/bin/bash
# Verifier (count-lines, variant 30012): line count of /app/orders.txt: 27.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/value.txt)" = "27" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

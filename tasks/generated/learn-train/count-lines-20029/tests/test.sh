#!/bin/bash
# Verifier (count-lines, variant 20029): lines of /app/stock.txt equal to copper: 3.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/final.txt)" = "3" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

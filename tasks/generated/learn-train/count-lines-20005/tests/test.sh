#!/bin/bash
# Verifier (count-lines, variant 20005): lines of /app/records.dat equal to rocket: 1.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/figure.txt)" = "1" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

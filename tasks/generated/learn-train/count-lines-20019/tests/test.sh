#!/bin/bash
# Verifier (count-lines, variant 20019): lines of /app/catalog.dat equal to willow: 2.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/total.txt)" = "2" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

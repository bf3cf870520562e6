#!/bin/bash
# Verifier (count-lines, variant 30026): lines of /app/catalog.dat equal to meadow: 1.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/answer.txt)" = "1" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

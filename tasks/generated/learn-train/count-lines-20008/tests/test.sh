#!/bin/bash
# Verifier (count-lines, variant 20008): lines of /app/orders.dat equal to forest: 1.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/tally.txt)" = "1" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

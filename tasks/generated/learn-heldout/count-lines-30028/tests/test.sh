#!/bin/bash
# Verifier (count-lines, variant 30028): lines of /app/stock.dat equal to thunder: 2.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/figure.txt)" = "2" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt

#!/bin/bash
# Verifier (count-lines, variant 30020): lines of /app/metrics.dat equal to candle: 1.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/tally.txt)" = "1" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
